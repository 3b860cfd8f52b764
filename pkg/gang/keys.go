package gang

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// GateName is the scheduling gate the built-in gang puts on every replica
// pod until all of them exist.
const GateName = "trainstep.dev/gang"

// scheduler-plugins (sigs.k8s.io/scheduler-plugins, coscheduling).
const (
	// SchedulerPluginsLabel names the PodGroup a pod belongs to
	// (apis/scheduling/v1alpha1 PodGroupLabel).
	SchedulerPluginsLabel = "scheduling.x-k8s.io/pod-group"
	// SchedulerPluginsSchedulerName is the profile name of scheduler-plugins
	// installed as a second scheduler with its own chart
	// (manifests/install/charts/as-a-second-scheduler, scheduler.name).
	SchedulerPluginsSchedulerName = "scheduler-plugins-scheduler"
)

// Volcano (volcano.sh/apis pkg/apis/scheduling/v1beta1).
const (
	// VolcanoGroupAnnotation names the PodGroup a pod belongs to
	// (KubeGroupNameAnnotationKey).
	VolcanoGroupAnnotation = "scheduling.k8s.io/group-name"
	// VolcanoSchedulerName is Volcano's scheduler.
	VolcanoSchedulerName = "volcano"
)

// Kueue plain-pod groups (sigs.k8s.io/kueue: pkg/controller/constants
// QueueLabel and WorkloadPriorityClassLabel; pkg/controller/jobs/pod/constants GroupNameLabel,
// GroupTotalCountAnnotation and PodFinalizer; pkg/controller/jobs/pod
// ConditionTypeTerminationTarget; pkg/controller/jobframework
// StopReasonWorkloadEvicted, which the reconciler suffixes with
// "DueTo<eviction reason>").
const (
	KueueQueueLabel           = v1alpha1.LabelKueueQueueName
	KueuePriorityClassLabel   = v1alpha1.LabelKueuePriorityClass
	KueuePodGroupLabel        = "kueue.x-k8s.io/pod-group-name"
	KueueTotalCountAnnotation = "kueue.x-k8s.io/pod-group-total-count"
	// KueueAdmissionGate is the scheduling gate Kueue's webhook puts on
	// every pod it manages, lifted once it admits the pod's group
	// (pkg/controller/jobs/pod/constants SchedulingGateName).
	KueueAdmissionGate = "kueue.x-k8s.io/admission"
	// KueueFinalizer is on every pod Kueue manages; it removes it only once
	// the group finished or a replacement pod exists.
	KueueFinalizer = "kueue.x-k8s.io/managed"
	// KueueStoppedCondition is the pod condition Kueue sets, True, on each
	// pod of a group it stops (and deletes); the reason says why.
	KueueStoppedCondition = "TerminationTarget"
	// KueueEvictedReason starts the reason of a pod Kueue stopped because
	// it evicted the group's Workload: "WorkloadEvicted", or with Kueue's
	// eviction reason appended, e.g. "WorkloadEvictedDueToPreempted".
	KueueEvictedReason = "WorkloadEvicted"
	// KueueWorkloadDeletedReason is the reason of a pod Kueue stopped
	// because the group's Workload is being deleted
	// (StopReasonWorkloadDeleted).
	KueueWorkloadDeletedReason = "WorkloadDeleted"
)

// Kubernetes' own gang scheduling (KEP-4671, k8s.io/api scheduling/v1beta1).
const (
	// KubernetesFeatureGate must be on in kube-apiserver, kube-scheduler and
	// kube-controller-manager.
	KubernetesFeatureGate = "GenericWorkload"
	// KubernetesMinVersion is the first release serving the PodGroup API
	// at scheduling.k8s.io/v1beta1.
	KubernetesMinVersion = "1.37"
	// KubernetesScheduledCondition is the PodGroup condition the scheduler
	// sets, with reason Unschedulable and its message while the group does
	// not fit (PodGroupInitiallyScheduled).
	KubernetesScheduledCondition = "PodGroupInitiallyScheduled"
)

// PodGroup resources created with the dynamic client.
var (
	KubernetesPodGroups       = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}
	SchedulerPluginsPodGroups = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	VolcanoPodGroups          = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
)

// KueueWorkloads are Kueue's Workloads, one per pod group, named after the
// group (kueue.x-k8s.io/v1beta2, served since Kueue v0.15; read-only here).
var KueueWorkloads = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

// PodGroupResource returns the PodGroup resource a gang kind creates, and
// false for kinds without one (none, builtin, kueue).
func PodGroupResource(kind v1alpha1.GangKind) (schema.GroupVersionResource, bool) {
	switch kind {
	case v1alpha1.GangKubernetes:
		return KubernetesPodGroups, true
	case v1alpha1.GangSchedulerPlugins:
		return SchedulerPluginsPodGroups, true
	case v1alpha1.GangVolcano:
		return VolcanoPodGroups, true
	}
	return schema.GroupVersionResource{}, false
}

// CRDName is the CustomResourceDefinition that serves gvr, e.g.
// "podgroups.scheduling.x-k8s.io": what an error names when it is missing.
func CRDName(gvr schema.GroupVersionResource) string {
	return gvr.Resource + "." + gvr.Group
}

// Kind returns the job's gang kind, none when it has no scheduling policy.
func Kind(job *v1alpha1.TrainJob) v1alpha1.GangKind {
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.Gang != "" {
		return sp.Gang
	}
	return v1alpha1.GangNone
}
