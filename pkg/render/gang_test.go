package render_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

func withGang(sp v1alpha1.SchedulingPolicy) func(*v1alpha1.TrainJob) {
	return func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.SchedulingPolicy = &sp }
}

// TestGangPodFields checks what each gang kind puts on every replica pod
// and that only scheduler-plugins and Volcano get a PodGroup.
func TestGangPodFields(t *testing.T) {
	cases := []struct {
		name          string
		sp            v1alpha1.SchedulingPolicy
		template      string // template schedulerName
		labels        map[string]string
		annotations   map[string]string
		schedulerName string
		gates         []corev1.PodSchedulingGate
		podGroup      string // apiVersion, "" for none
	}{
		{name: "none", sp: v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangNone}},
		{name: "builtin", sp: v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangBuiltin},
			gates: []corev1.PodSchedulingGate{{Name: "trainstep.dev/gang"}}},
		{name: "scheduler-plugins", sp: v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangSchedulerPlugins},
			labels: map[string]string{"scheduling.x-k8s.io/pod-group": "mnist"}, schedulerName: "scheduler-plugins-scheduler",
			podGroup: "scheduling.x-k8s.io/v1alpha1"},
		{name: "scheduler-plugins keeps a profile named in the template", sp: v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangSchedulerPlugins},
			template: "my-coscheduler",
			labels:   map[string]string{"scheduling.x-k8s.io/pod-group": "mnist"}, schedulerName: "my-coscheduler",
			podGroup: "scheduling.x-k8s.io/v1alpha1"},
		{name: "volcano", sp: v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangVolcano, Queue: "q"},
			annotations: map[string]string{"scheduling.k8s.io/group-name": "mnist"}, schedulerName: "volcano",
			podGroup: "scheduling.volcano.sh/v1beta1"},
		{name: "kueue", sp: v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: "team-a"},
			labels:      map[string]string{"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/pod-group-name": "mnist"},
			annotations: map[string]string{"kueue.x-k8s.io/pod-group-total-count": "3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{ps: 1, worker: 2}, withGang(tc.sp),
				func(j *v1alpha1.TrainJob) { j.Spec.ReplicaSpecs[worker].Template.Spec.SchedulerName = tc.template })
			objs, err := render.Render(job, identity("ns", "mnist"), render.Inputs{})
			if err != nil {
				t.Fatal(err)
			}
			for _, pod := range objs.Pods {
				for k, v := range tc.labels {
					if pod.Labels[k] != v {
						t.Errorf("%s label %s = %q, want %q", pod.Name, k, pod.Labels[k], v)
					}
				}
				for k, v := range tc.annotations {
					if pod.Annotations[k] != v {
						t.Errorf("%s annotation %s = %q, want %q", pod.Name, k, pod.Annotations[k], v)
					}
				}
				want := tc.schedulerName
				if pod.Labels[v1alpha1.LabelReplicaType] == "ps" && tc.template != "" {
					want = "scheduler-plugins-scheduler"
				}
				if pod.Spec.SchedulerName != want {
					t.Errorf("%s schedulerName = %q, want %q", pod.Name, pod.Spec.SchedulerName, want)
				}
				if diff := cmp.Diff(tc.gates, pod.Spec.SchedulingGates); diff != "" {
					t.Errorf("%s schedulingGates (-want +got):\n%s", pod.Name, diff)
				}
			}
			switch {
			case tc.podGroup == "" && objs.PodGroup != nil:
				t.Errorf("unexpected PodGroup %v", objs.PodGroup)
			case tc.podGroup != "" && (objs.PodGroup == nil || objs.PodGroup.GetAPIVersion() != tc.podGroup):
				t.Fatalf("PodGroup = %v, want a %s", objs.PodGroup, tc.podGroup)
			case tc.podGroup != "":
				if objs.PodGroup.GetName() != "mnist" || objs.PodGroup.GetNamespace() != "ns" || len(objs.PodGroup.GetOwnerReferences()) != 1 ||
					objs.PodGroup.GetLabels()[v1alpha1.LabelJobName] != "mnist" {
					t.Errorf("PodGroup metadata: %+v", objs.PodGroup.Object["metadata"])
				}
				if objs.List()[0] != objs.PodGroup {
					t.Error("the PodGroup is not created first")
				}
			}
		})
	}
}
