package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// TestBuiltinGangCreatesGatedThenLiftsEveryGate checks the order the
// scheduler sees: every pod is created gated, and the gates are lifted only
// once all of them exist.
func TestBuiltinGangCreatesGatedThenLiftsEveryGate(t *testing.T) {
	job := tfJob(v1alpha1.RestartPolicyNever)
	job.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangBuiltin
	h := start(t, job)
	names := []string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"}
	testutil.Eventually(h.t, waitTimeout, "every gate lifted", func() bool {
		for _, n := range names {
			if p := h.pod(n); p == nil || gang.HasGate(p) {
				return false
			}
		}
		return true
	})
	creates, firstPatch := 0, -1
	for i, a := range h.client.Actions() {
		switch {
		case a.GetVerb() == "create" && a.GetResource().Resource == "pods":
			pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
			if !gang.HasGate(pod) {
				t.Errorf("pod %s was created without the gang's gate", pod.Name)
			}
			if firstPatch >= 0 {
				t.Errorf("pod %s was created after a gate was lifted", pod.Name)
			}
			creates++
		case a.GetVerb() == "patch" && a.GetResource().Resource == "pods" && firstPatch < 0:
			firstPatch = i
		case a.GetVerb() == "delete":
			t.Errorf("unexpected delete %v", a)
		}
	}
	if creates != len(names) {
		t.Errorf("created %d pods, want %d", creates, len(names))
	}
}

// Under Kubernetes' gang the PodGroup comes first, every pod is sent with
// spec.schedulingGroup (through the dynamic client: the typed Pod has no
// such field), and a gang the scheduler does not place within the timeout
// ends Transient Unschedulable, saying what the scheduler said.
func TestKubernetesGangPodsJoinThePodGroupAndAnUnplacedGangSaysWhy(t *testing.T) {
	job := tfJob(v1alpha1.RestartPolicyNever)
	job.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangKubernetes
	job.Spec.RunPolicy.SchedulingPolicy.ScheduleTimeoutSeconds = ptr.To[int32](1)
	const says = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, pod group preemption: No preemption victims found for incoming preemptor"
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gang.KubernetesPodGroups: "PodGroupList", corev1.SchemeGroupVersion.WithResource("pods"): "PodList"})
	h := startWith(t, job, func(h *harness, o *Options) {
		h.runErr = make(chan error, 1)
		// Pods sent through the dynamic client land where the informers watch.
		dyn.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			u := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
			var pod corev1.Pod
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
				return true, nil, err
			}
			created, err := h.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), &pod, metav1.CreateOptions{})
			if err != nil {
				return true, nil, err
			}
			out := u.DeepCopy()
			out.SetUID(created.UID)
			return true, out, nil
		})
		// The scheduler's word on the group, as kube-scheduler 1.37 sets it.
		dyn.PrependReactor("get", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
			pg := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
				"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable", "message": says}}}}}
			return true, pg, nil
		})
		o.Dynamic = dyn
	})
	var err error
	select {
	case err = <-h.runErr:
	case <-time.After(15 * time.Second):
		t.Fatal("the run did not end")
	}
	if result.PhaseOf(err) != result.PhaseTransient || !strings.Contains(err.Error(), "Unschedulable: "+says) {
		t.Fatalf("Run: %v, want Transient with the scheduler's message", err)
	}
	var re *result.Error
	if !errors.As(err, &re) || re.Reason != result.ReasonUnschedulable {
		t.Errorf("reason of %v, want %s", err, result.ReasonUnschedulable)
	}
	var order []string
	for _, a := range dyn.Actions() {
		if a.GetVerb() != "create" {
			continue
		}
		obj := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
		order = append(order, obj.GetKind()+"/"+obj.GetName())
		if obj.GetKind() == "Pod" {
			if g, _, _ := unstructured.NestedString(obj.Object, "spec", "schedulingGroup", "podGroupName"); g != "mnist" {
				t.Errorf("pod %s sent with schedulingGroup.podGroupName %q, want mnist", obj.GetName(), g)
			}
		}
	}
	if len(order) != 4 || order[0] != "PodGroup/mnist" {
		t.Errorf("dynamic creates %v, want the PodGroup and then the 3 pods", order)
	}
	// The fake's own creates are those forwarded above: none went around.
	typed := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			typed++
		}
	}
	if typed != len(order)-1 {
		t.Errorf("%d pods created through the typed client, %d through the dynamic one", typed, len(order)-1)
	}
}

// An elastic job that scales on metrics starts with its target's workers:
// the built-in gang waits for those, not for every slot up to maxReplicas
// (which it would wait for for ever), and Kueue's group counts the same.
func TestGangOfAnElasticJobOnMetricsIsItsStartingWorkers(t *testing.T) {
	job := onCPUUtilization(elasticJob(2, 2, 4), 50)
	job.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangBuiltin
	h := start(t, job)
	testutil.Eventually(h.t, waitTimeout, "the gates of the 2 starting workers lifted", func() bool {
		for _, n := range []string{"el-worker-0", "el-worker-1"} {
			if p := h.pod(n); p == nil || gang.HasGate(p) {
				return false
			}
		}
		return true
	})
	if _, err := h.client.CoreV1().Pods(ns).Get(context.Background(), "el-worker-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("el-worker-2, above the target, exists or failed to read: %v", err)
	}
	if got := frameworks.GangSize(job); got != 2 {
		t.Errorf("GangSize = %d, want the 2 starting workers (Kueue's pod-group-total-count)", got)
	}
	// A copy: the controller still reads the job it runs.
	withoutMetrics := job.DeepCopy()
	withoutMetrics.Spec.ElasticPolicy.Metrics = nil
	for grow, want := range map[bool]int32{true: 4, false: 2} {
		withoutMetrics.Spec.ElasticPolicy.GrowIntoCapacity = &grow
		if got := frameworks.GangSize(withoutMetrics); got != want {
			t.Errorf("GangSize without metrics, growIntoCapacity %v = %d, want %d (every slot up to maxReplicas, or the Worker replicas)", grow, got, want)
		}
	}
}

// A built-in gang a ResourceQuota refuses in part gives back the pods it
// created once the quota has refused the rest for its patience (here the
// 2 s scheduling timeout), so that it holds no part of the quota while it
// waits, and creates the whole gang again once the quota has room; the
// gates are lifted only then, and nothing counts as a restart.
func TestBuiltinGangAQuotaRefusesInPartIsReleasedAndTriedAgain(t *testing.T) {
	t.Parallel()
	job := builtinGangJob(2)
	// The quota refuses worker 1 until the gang gave back what it created.
	var refusing atomic.Bool
	refusing.Store(true)
	h := startWith(t, job, func(hh *harness, o *Options) {
		hh.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if action.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName() == "mnist-worker-1" && refusing.Load() {
				return true, nil, quotaRefusal("mnist-worker-1")
			}
			return false, nil, nil
		})
		hh.client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			refusing.Store(false)
			return false, nil, nil
		})
	})
	names := []string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"}
	testutil.Eventually(h.t, waitTimeout, "every gate lifted", func() bool {
		for _, n := range names {
			if p := h.pod(n); p == nil || gang.HasGate(p) {
				return false
			}
		}
		return true
	})
	deletes, released, lifted := 0, map[string]bool{}, false
	for _, a := range h.client.Actions() {
		switch {
		case a.GetVerb() == "delete" && a.GetResource().Resource == "pods":
			deletes++
			released[a.(k8stesting.DeleteAction).GetName()] = true
			if lifted {
				t.Errorf("a pod was released after the gates were lifted")
			}
		case a.GetVerb() == "patch" && a.GetResource().Resource == "pods":
			lifted = true
		}
	}
	if deletes == 0 || released["mnist-worker-1"] {
		t.Errorf("released %v (%d deletes), want the pods the quota let in and not the one it refused", released, deletes)
	}
	h.setStatus("mnist-worker-0", corev1.PodSucceeded, 0)
	if d := h.decision(); d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %+v, want Succeeded", d)
	}
	if r := h.ctrl.View().Restarts; r != 0 {
		t.Errorf("restarts = %d, want 0: a release for quota is no restart", r)
	}
}

// A gang given back for quota is made again only once every pod it gave
// back went: a released rank still stopping (its grace period, a
// finalizer) would otherwise run beside the new ranks of the same job
// attempt, a collective the new ones cannot join (found by the
// simulation, seed 851392270, under Kueue).
func TestBuiltinGangTriesAgainOnlyOnceTheReleasedPodsWent(t *testing.T) {
	t.Parallel()
	job := builtinGangJob(2)
	var refusing atomic.Bool
	refusing.Store(true)
	var stopping atomic.Int32
	var beside atomic.Value // the name of a pod created while a released one stopped
	h := startWith(t, job, func(hh *harness, o *Options) {
		hh.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			name := action.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
			if name == "mnist-worker-1" && refusing.Load() {
				return true, nil, quotaRefusal(name)
			}
			if stopping.Load() > 0 {
				beside.CompareAndSwap(nil, name)
			}
			return false, nil, nil
		})
		// Each released pod stops slowly: the delete marks it, as the API
		// server does while its kubelet stops it.
		hh.client.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			refusing.Store(false)
			obj, err := hh.client.Tracker().Get(podsGVR, ns, action.(k8stesting.DeleteAction).GetName())
			if err != nil {
				return true, nil, err
			}
			pod := obj.(*corev1.Pod).DeepCopy()
			if pod.DeletionTimestamp == nil {
				pod.DeletionTimestamp = ptr.To(metav1.Now())
				stopping.Add(1)
			}
			return true, nil, hh.client.Tracker().Update(podsGVR, pod, ns)
		})
	})
	testutil.Eventually(h.t, waitTimeout, "the pods the quota let in released", func() bool { return stopping.Load() == 2 })
	// Longer than the backoff after a first release for quota (at most 1.5 s).
	time.Sleep(3 * time.Second)
	if name := beside.Load(); name != nil {
		t.Errorf("%s was created while a released pod of the gang was still stopping", name)
	}
	for _, name := range []string{"mnist-ps-0", "mnist-worker-0"} {
		stopping.Add(-1)
		if err := h.client.Tracker().Delete(podsGVR, ns, name); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"}
	testutil.Eventually(h.t, waitTimeout, "the gang made again, every gate lifted", func() bool {
		for _, n := range names {
			obj, err := h.client.Tracker().Get(podsGVR, ns, n)
			if err != nil || obj.(*corev1.Pod).DeletionTimestamp != nil || gang.HasGate(obj.(*corev1.Pod)) {
				return false
			}
		}
		return true
	})
}

// builtinGangJob is a TensorFlow job (RestartPolicy Never) in a built-in
// gang that waits timeout seconds for its pods to be scheduled.
func builtinGangJob(timeout int32) *v1alpha1.TrainJob {
	job := tfJob(v1alpha1.RestartPolicyNever)
	job.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangBuiltin
	job.Spec.RunPolicy.SchedulingPolicy.ScheduleTimeoutSeconds = ptr.To(timeout)
	return job
}
