package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/policy"
)

// The simulated world's schedulers that hold a gang, as the controller sees
// them, and metrics.k8s.io:
//
//   - scheduler-plugins' coscheduling binds no pod of a PodGroup until the
//     PodGroup exists, minMember of its pods are there, and the cluster has
//     room for the group;
//   - Kueue's webhook gates every pod of a queue and adds its finalizer;
//     Kueue admits a pod group (its Workload, owned by the pods) once
//     pod-group-total-count of its pods exist and its ClusterQueue has room,
//     lifting the gates; a pod joining an admitted group is let through;
//   - metrics.k8s.io reports each running worker using the world's load, a
//     share of its cpu request that the fault script moves.

// newSimDynamic is the API server of the PodGroups and Kueue's Workloads,
// refusing writes while the world's faults say so.
func (w *simWorld) newSimDynamic() *dynamicfake.FakeDynamicClient {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gang.KueueWorkloads: "WorkloadList", gang.SchedulerPluginsPodGroups: "PodGroupList", networkPolicies: "NetworkPolicyList"})
	dyn.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		verb := action.GetVerb()
		name := ""
		if a, ok := action.(interface{ GetName() string }); ok {
			name = a.GetName()
		}
		if w.outage() {
			w.logf("refuse %s %s %s: kube-apiserver restarts", verb, action.GetResource().Resource, name)
			return true, nil, outageError()
		}
		if f := w.writeFault(verb); f != nil {
			w.logf("refuse %s %s %s: %d", verb, action.GetResource().Resource, name, f.code)
			return true, nil, f.error(verb, action.GetResource(), name)
		}
		if a, ok := action.(k8stesting.CreateAction); ok {
			// The API server gives every object its UID.
			if m, ok := a.GetObject().(metav1.Object); ok && m.GetUID() == "" {
				w.uidSeq++
				m.SetUID(types.UID(fmt.Sprintf("u%d", w.uidSeq)))
			}
		}
		if verb == "create" || verb == "delete" {
			w.logf("%s %s %s", verb, action.GetResource().Resource, name)
		}
		return false, nil, nil
	})
	return dyn
}

// groupPods lists the job's pods whose label key is group, neither being
// deleted nor ended.
func (w *simWorld) groupPods(key, group string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range w.jobPods() {
		if p.Labels[key] != group || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	return out
}

// coschedulingHolds reports whether scheduler-plugins' coscheduling keeps
// pod unbound: its PodGroup is missing, fewer than minMember of the
// group's pods are there, or the cluster has no room for the group yet.
func (w *simWorld) coschedulingHolds(pod *corev1.Pod) bool {
	group := pod.Labels[gang.SchedulerPluginsLabel]
	if group == "" {
		return false
	}
	obj, err := w.dyn.Tracker().Get(gang.SchedulerPluginsPodGroups, pod.Namespace, group)
	if err != nil {
		return true
	}
	minMember, _, _ := unstructured.NestedInt64(obj.(*unstructured.Unstructured).Object, "spec", "minMember")
	return int64(len(w.groupPods(gang.SchedulerPluginsLabel, group))) < minMember || w.now().Before(w.roomFrom)
}

// kueueWebhook gates a new pod of a Kueue queue and adds Kueue's finalizer.
func kueueWebhook(pod *corev1.Pod) {
	if pod.Labels[gang.KueueQueueLabel] == "" {
		return
	}
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: gang.KueueAdmissionGate})
	pod.Finalizers = append(pod.Finalizers, gang.KueueFinalizer)
}

// kueueNotices has Kueue look at pod's group a moment after pod changed.
func (w *simWorld) kueueNotices(pod *corev1.Pod) {
	group := pod.Labels[gang.KueuePodGroupLabel]
	if group == "" || !gang.KueueGated(pod) || pod.DeletionTimestamp != nil {
		return
	}
	w.after(time.Duration(50+w.rng.IntN(500))*time.Millisecond, 0, "kueue looks at "+group, func() { w.kueueAdmit(group) })
}

// kueueAdmit admits a complete pod group when its ClusterQueue has room
// (saying why not on its Workload meanwhile), and lifts the admission gate
// of every pod of an admitted group.
func (w *simWorld) kueueAdmit(group string) {
	pods := w.groupPods(gang.KueuePodGroupLabel, group)
	if len(pods) == 0 {
		return
	}
	if !w.kueueAdmitted[group] {
		total, _ := strconv.Atoi(pods[0].Annotations[gang.KueueTotalCountAnnotation])
		if len(pods) < total {
			return
		}
		room := !w.now().Before(w.roomFrom)
		w.putWorkload(group, pods, room)
		if !room {
			w.after(w.roomFrom.Sub(w.now()), 0, "kueue looks at "+group, func() { w.kueueAdmit(group) })
			return
		}
		w.kueueAdmitted[group] = true
	}
	for _, p := range pods {
		if !gang.KueueGated(p) {
			continue
		}
		var gates []corev1.PodSchedulingGate
		for _, g := range p.Spec.SchedulingGates {
			if g.Name != gang.KueueAdmissionGate {
				gates = append(gates, g)
			}
		}
		p.Spec.SchedulingGates = gates
		w.updatePod(p, "kueue admits")
	}
}

// putWorkload writes the group's Workload as Kueue does: owned by its
// pods, its quota reserved or not.
func (w *simWorld) putWorkload(group string, pods []*corev1.Pod, reserved bool) {
	wl := &unstructured.Unstructured{}
	wl.SetAPIVersion(gang.KueueWorkloads.GroupVersion().String())
	wl.SetKind("Workload")
	wl.SetNamespace(simNamespace)
	wl.SetName(group)
	var refs []metav1.OwnerReference
	for _, p := range pods {
		refs = append(refs, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID})
	}
	wl.SetOwnerReferences(refs)
	status, message := "True", ""
	if !reserved {
		status, message = "False", "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default"
	}
	_ = unstructured.SetNestedSlice(wl.Object, []any{map[string]any{"type": "QuotaReserved", "status": status, "message": message}}, "status", "conditions")
	tracker := w.dyn.Tracker()
	if old, err := tracker.Get(gang.KueueWorkloads, simNamespace, group); err == nil {
		wl.SetUID(old.(*unstructured.Unstructured).GetUID())
		_ = tracker.Update(gang.KueueWorkloads, wl, simNamespace)
		return
	}
	w.uidSeq++
	wl.SetUID(types.UID(fmt.Sprintf("u%d", w.uidSeq)))
	if err := tracker.Create(gang.KueueWorkloads, wl, simNamespace); err == nil {
		w.logf("kueue creates Workload %s (quota reserved: %v)", group, reserved)
	}
}

// simPodMetrics plays metrics.k8s.io: every running worker uses the
// world's load of its cpu request.
type simPodMetrics struct{ w *simWorld }

func (m simPodMetrics) List(_ context.Context, namespace string, _ metav1.ListOptions) (*metricsv1beta1.PodMetricsList, error) {
	list := &metricsv1beta1.PodMetricsList{}
	for _, p := range m.w.jobPods() {
		if p.Labels[v1alpha1.LabelReplicaType] != "worker" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if n := m.w.node(p.Spec.NodeName); n == nil || !n.up {
			continue // a silent kubelet reports no usage
		}
		usage := resource.NewMilliQuantity(simWorkerCPU*m.w.load/100, resource.DecimalSI)
		list.Items = append(list.Items, metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: namespace},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: p.Spec.Containers[0].Name, Usage: corev1.ResourceList{corev1.ResourceCPU: *usage}}}})
	}
	return list, nil
}

// simWorkerCPU is an elastic worker's cpu request in the simulation, in
// millicores.
const simWorkerCPU = 1000

// onMetrics makes an elastic job scale on its workers' cpu utilization,
// aiming at percent of a request of simWorkerCPU.
func onMetrics(job *v1alpha1.TrainJob, percent int32) *v1alpha1.TrainJob {
	job = onCPUUtilization(job, percent)
	spec := &job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Template.Spec
	spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(simWorkerCPU, resource.DecimalSI)}
	return job
}

// runAutoscaler evaluates the metrics every policy.AutoscalePeriod while
// the controller of gen runs, as its autoscaler goroutine would.
func (r *simRun) runAutoscaler(c *Controller, gen int) {
	w := r.w
	w.after(policy.AutoscalePeriod, gen, "autoscaler", func() {
		before := c.WorkerTarget()
		c.evaluateMetrics(r.ctx, simPodMetrics{w: w})
		if after := c.WorkerTarget(); after != before {
			w.logf("worker target %d -> %d (load %d%%)", before, after, w.load)
			r.targets = append(r.targets, after)
		}
		r.runAutoscaler(c, gen)
	})
}
