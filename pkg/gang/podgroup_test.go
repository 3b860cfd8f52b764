package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// testJob has 1 Chief (2 cpu) and 3 Workers (1 cpu, 1 GPU given as a limit only).
func testJob(sp *v1alpha1.SchedulingPolicy) *v1alpha1.TrainJob {
	container := func(cpu string, gpu bool) corev1.Container {
		c := corev1.Container{Name: "tensorflow", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
		}}
		if gpu {
			c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		}
		return c
	}
	return &v1alpha1.TrainJob{Spec: v1alpha1.TrainJobSpec{
		Framework: v1alpha1.FrameworkTensorFlow,
		ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
			"Chief":  {Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container("2", false)}}}},
			"Worker": {Replicas: ptr.To[int32](3), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container("1", true)}}}},
		},
		RunPolicy: v1alpha1.RunPolicy{SchedulingPolicy: sp},
	}}
}

func TestForPodsGivesEachKindItsSchedulersKeys(t *testing.T) {
	cases := []struct {
		name string
		sp   *v1alpha1.SchedulingPolicy
		want PodSettings
	}{
		{"no policy", nil, PodSettings{}},
		{"none", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangNone}, PodSettings{}},
		{"builtin gates every pod", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangBuiltin},
			PodSettings{Gates: []corev1.PodSchedulingGate{{Name: "trainstep.dev/gang"}}}},
		{"kubernetes joins the job's PodGroup, default scheduler", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKubernetes},
			PodSettings{SchedulingGroup: "job"}},
		{"scheduler-plugins", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangSchedulerPlugins},
			PodSettings{Labels: map[string]string{"scheduling.x-k8s.io/pod-group": "job"}, SchedulerName: "scheduler-plugins-scheduler"}},
		{"volcano", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangVolcano, Queue: "q"},
			PodSettings{Annotations: map[string]string{"scheduling.k8s.io/group-name": "job"}, SchedulerName: "volcano"}},
		// Kueue's keys, from sigs.k8s.io/kueue (checked against v0.17.0): pkg/controller/constants QueueLabel,
		// pkg/controller/jobs/pod/constants GroupNameLabel and GroupTotalCountAnnotation.
		{"kueue", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: "team-a"},
			PodSettings{
				Labels:      map[string]string{"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/pod-group-name": "job"},
				Annotations: map[string]string{"kueue.x-k8s.io/pod-group-total-count": "4"},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ForPods(testJob(tc.sp), "job")); diff != "" {
				t.Errorf("ForPods (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMinResourcesSumsTheFirstMinAvailableReplicas(t *testing.T) {
	cases := []struct {
		name string
		sp   *v1alpha1.SchedulingPolicy
		want corev1.ResourceList
	}{
		{"all replicas", &v1alpha1.SchedulingPolicy{}, corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("5"), "nvidia.com/gpu": resource.MustParse("3")}},
		{"chief and one worker", &v1alpha1.SchedulingPolicy{MinAvailable: ptr.To[int32](2)}, corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("3"), "nvidia.com/gpu": resource.MustParse("1")}},
		{"explicit minResources win", &v1alpha1.SchedulingPolicy{MinResources: &corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
			corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := MinResources(testJob(tc.sp))
			if len(got) != len(tc.want) {
				t.Fatalf("MinResources = %v, want %v", got, tc.want)
			}
			for name, q := range tc.want {
				if g := got[name]; g.Cmp(q) != 0 {
					t.Errorf("MinResources[%s] = %s, want %s", name, g.String(), q.String())
				}
			}
		})
	}
}

func TestPodRequestsTakesTheLargestInitContainerAndOverhead(t *testing.T) {
	spec := &corev1.PodSpec{
		Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
			{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}},
		},
		InitContainers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}},
		},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}
	got := PodRequests(spec)
	if q := got[corev1.ResourceCPU]; q.Cmp(resource.MustParse("3100m")) != 0 {
		t.Errorf("cpu = %s, want 3100m", q.String())
	}
}

func TestPodGroupCarriesEachProjectsFields(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "step", UID: "u1", Controller: ptr.To(true)}
	meta := metav1.ObjectMeta{Name: "job", Namespace: "ns", Labels: map[string]string{"trainstep.dev/job-name": "job"},
		OwnerReferences: []metav1.OwnerReference{owner}}
	cases := []struct {
		name       string
		sp         *v1alpha1.SchedulingPolicy
		apiVersion string
		spec       map[string]any
	}{
		// k8s.io/api v0.37.2 scheduling/v1beta1 PodGroupSpec: a standalone group
		// (no workloadRef), minCount from minAvailable, the whole group disrupted.
		{"kubernetes", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKubernetes, MinAvailable: ptr.To[int32](3), PriorityClass: "high", ScheduleTimeoutSeconds: ptr.To[int32](60), Queue: "ignored"},
			"scheduling.k8s.io/v1beta1", map[string]any{
				"schedulingPolicy":  map[string]any{"gang": map[string]any{"minCount": int64(3)}},
				"disruptionMode":    map[string]any{"all": map[string]any{}},
				"priorityClassName": "high"}},
		{"kubernetes without a priority class", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKubernetes},
			"scheduling.k8s.io/v1beta1", map[string]any{
				"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(4)}},
				"disruptionMode":   map[string]any{"all": map[string]any{}}}},
		{"scheduler-plugins", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangSchedulerPlugins, ScheduleTimeoutSeconds: ptr.To[int32](60), Queue: "ignored"},
			"scheduling.x-k8s.io/v1alpha1", map[string]any{
				"minMember": int64(4), "scheduleTimeoutSeconds": int64(60),
				"minResources": map[string]any{"cpu": "5", "nvidia.com/gpu": "3"}}},
		{"volcano", &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangVolcano, MinAvailable: ptr.To[int32](2), Queue: "research", PriorityClass: "high", ScheduleTimeoutSeconds: ptr.To[int32](60)},
			"scheduling.volcano.sh/v1beta1", map[string]any{
				"minMember": int64(2), "queue": "research", "priorityClassName": "high",
				"minResources": map[string]any{"cpu": "3", "nvidia.com/gpu": "1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pg := PodGroup(testJob(tc.sp), meta)
			if pg == nil {
				t.Fatal("no PodGroup")
			}
			if pg.GetAPIVersion() != tc.apiVersion || pg.GetKind() != "PodGroup" || pg.GetName() != "job" || pg.GetNamespace() != "ns" {
				t.Errorf("PodGroup is %s %s %s/%s", pg.GetAPIVersion(), pg.GetKind(), pg.GetNamespace(), pg.GetName())
			}
			if diff := cmp.Diff(tc.spec, pg.Object["spec"]); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]metav1.OwnerReference{owner}, pg.GetOwnerReferences()); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
		})
	}
	for _, kind := range []v1alpha1.GangKind{v1alpha1.GangNone, v1alpha1.GangBuiltin, v1alpha1.GangKueue} {
		if pg := PodGroup(testJob(&v1alpha1.SchedulingPolicy{Gang: kind, Queue: "q"}), meta); pg != nil {
			t.Errorf("gang %s made a PodGroup", kind)
		}
	}
}

// An MPI job whose launcher waits for Ready workers passes validation with
// a PodGroup only when its workers alone make the group: minMember and
// minResources count the workers, not the launcher created after them
// (mpi-operator's workers+1 deadlocks, kubeflow/mpi-operator#608). The
// gangs that wait for every replica's pod are refused.
func TestLauncherWaitingForWorkersIsNoGangMember(t *testing.T) {
	cpu := func(q string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mpi", Image: "mpi:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}}}}}
	}
	job := func(gang v1alpha1.GangKind, minAvailable *int32) *v1alpha1.TrainJob {
		j := &v1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "ns"}, Spec: v1alpha1.TrainJobSpec{
			Framework:              v1alpha1.FrameworkMPI,
			LauncherCreationPolicy: v1alpha1.LauncherCreationWaitForWorkersReady,
			ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				"Launcher": {Replicas: ptr.To[int32](1), Template: cpu("100m")},
				"Worker":   {Replicas: ptr.To[int32](3), Template: cpu("2")},
			},
			RunPolicy: v1alpha1.RunPolicy{SchedulingPolicy: &v1alpha1.SchedulingPolicy{Gang: gang, Queue: "q", MinAvailable: minAvailable}},
		}}
		frameworks.SetDefaults(j)
		return j
	}
	for _, kind := range []v1alpha1.GangKind{v1alpha1.GangKubernetes, v1alpha1.GangSchedulerPlugins, v1alpha1.GangVolcano} {
		if errs := frameworks.Validate(job(kind, nil)); len(errs) != 1 || errs[0].Field != "spec.launcherCreationPolicy" {
			t.Errorf("%s without minAvailable: errors %v, want the launcherCreationPolicy one", kind, errs)
		}
		j := job(kind, ptr.To[int32](3))
		if errs := frameworks.Validate(j); len(errs) != 0 {
			t.Fatalf("%s with minAvailable 3: %v", kind, errs.ToAggregate())
		}
		if got := MinMember(j); got != 3 {
			t.Errorf("%s: minMember %d, want the 3 workers", kind, got)
		}
		want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
		if diff := cmp.Diff(want, MinResources(j)); diff != "" {
			t.Errorf("%s: minResources (-want +got):\n%s", kind, diff)
		}
	}
	for _, kind := range []v1alpha1.GangKind{v1alpha1.GangBuiltin, v1alpha1.GangKueue} {
		if errs := frameworks.Validate(job(kind, ptr.To[int32](3))); len(errs) != 1 || errs[0].Field != "spec.launcherCreationPolicy" {
			t.Errorf("%s: errors %v, want spec.launcherCreationPolicy refused", kind, errs)
		}
	}
}

func TestPodObjectAddsTheSchedulingGroupTheTypedPodLacks(t *testing.T) {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", Namespace: "ns", Labels: map[string]string{"trainstep.dev/job-name": "job"}},
		Spec: corev1.PodSpec{PriorityClassName: "high", Containers: []corev1.Container{{Name: "tensorflow", Image: "train:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
	}
	same, err := PodObject(pod, "")
	if err != nil || same != pod {
		t.Fatalf("without a group: %v, %v; want the typed pod itself", same, err)
	}
	obj, err := PodObject(pod, "job")
	if err != nil {
		t.Fatal(err)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("with a group: %T, want unstructured", obj)
	}
	if got, _, _ := unstructured.NestedString(u.Object, "spec", "schedulingGroup", "podGroupName"); got != "job" {
		t.Errorf("spec.schedulingGroup.podGroupName = %q, want job", got)
	}
	// Everything else is the typed pod, unchanged.
	unstructured.RemoveNestedField(u.Object, "spec", "schedulingGroup")
	var back corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pod, &back); diff != "" {
		t.Errorf("pod (-typed +sent):\n%s", diff)
	}
	if u.GetKind() != "Pod" || u.GetAPIVersion() != "v1" {
		t.Errorf("kind %s/%s", u.GetAPIVersion(), u.GetKind())
	}
}

func TestKubernetesUnschedulableReadsTheSchedulersCondition(t *testing.T) {
	group := func(conditions ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": conditions}}}
	}
	cond := func(typ, status, reason, message string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message}
	}
	cases := []struct {
		name string
		pg   *unstructured.Unstructured
		want string
	}{
		{"not looked at yet", &unstructured.Unstructured{Object: map[string]any{}}, ""},
		{"does not fit", group(cond("DisruptionTarget", "False", "", ""),
			cond("PodGroupInitiallyScheduled", "False", "Unschedulable", "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining")),
			"Unschedulable: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"},
		{"scheduled", group(cond("PodGroupInitiallyScheduled", "True", "Scheduled", "")), ""},
		{"a reason only", group(cond("PodGroupInitiallyScheduled", "False", "SchedulerError", "")), "SchedulerError"},
	}
	for _, tc := range cases {
		if got := KubernetesUnschedulable(tc.pg); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// An elastic job's gang needs its minReplicas workers and its Master; the
// workers above minReplicas are outside the minimum and join later.
func TestElasticGangMinimumIsMinReplicasPlusTheMaster(t *testing.T) {
	lo, hi, two, one, grow := int32(2), int32(6), int32(2), int32(1), true
	job := &v1alpha1.TrainJob{Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkPyTorch,
		ElasticPolicy: &v1alpha1.ElasticPolicy{MinReplicas: &lo, MaxReplicas: &hi, GrowIntoCapacity: &grow},
		ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
			v1alpha1.ReplicaTypeMaster: {Replicas: &one},
			v1alpha1.ReplicaTypeWorker: {Replicas: &two},
		}}}
	if got := MinMember(job); got != 3 {
		t.Errorf("minMember = %d, want minReplicas 2 + the master", got)
	}
	if got := int32(frameworks.TotalReplicas(job)); got != 7 {
		t.Errorf("total replicas = %d, want maxReplicas 6 workers + the master", got)
	}
	five := int32(5)
	job.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{MinAvailable: &five}
	if got := MinMember(job); got != 5 {
		t.Errorf("minMember = %d, want the minAvailable asked for", got)
	}
}
