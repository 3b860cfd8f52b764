// Package kubeflow holds what Kubeflow's training manifests share — their
// replica specs, run policy and metadata — and the conversion of those
// parts to a TrainJob, keeping the defaults the Kubeflow Training Operator
// v1.9 and the MPI Operator v2 apply.
//
// Each kind (TFJob, PyTorchJob, …) is its framework's: it lives in the
// framework's folder (pkg/frameworks/<name>), which converts its own spec
// with this package's Converter, and pkg/frameworks finds a manifest's kind.
// The types here mirror only the spec fields of those kinds, so that a
// strict decoder rejects anything Kubeflow would not accept. The package
// does no I/O, never talks to a cluster, and does not validate the result:
// callers default and validate the TrainJob a kind returns.
package kubeflow

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// API versions of the Kubeflow kinds.
const (
	APIVersionV1      = "kubeflow.org/v1"
	APIVersionV2beta1 = "kubeflow.org/v2beta1"
)

// Kind is one Kubeflow kind a framework reads.
type Kind struct {
	APIVersion, Kind string
	// ReplicaSpecsField is the spec field holding the replicas
	// (tfReplicaSpecs, …), so errors can name the manifest's own path.
	ReplicaSpecsField string
	// New returns an empty object to decode a manifest into.
	New func() Object
}

// String spells the kind as error messages list it: "kubeflow.org/v1 TFJob".
func (k Kind) String() string { return k.APIVersion + " " + k.Kind }

// Object is a decoded Kubeflow manifest that can become a TrainJob.
type Object interface {
	// ToTrainJob converts the manifest, with Kubeflow's own defaults where
	// they differ from the TrainJob's, and returns warnings about fields
	// that are accepted but change nothing. An error says why the manifest
	// cannot run as it is, naming its field.
	ToTrainJob() (*v1alpha1.TrainJob, []string, error)
}

// Upgrader is implemented by a manifest of a kind trainstep does not run
// as it is but can rewrite as one it runs (Training Operator's MPIJob v1 as
// MPI Operator's v2beta1): `trainstep convert` prints the result.
type Upgrader interface {
	// Upgrade returns the rewritten manifest and what changes with it.
	Upgrade() (manifest any, changes []string, err error)
}

// ReplicaSpec is Kubeflow's ReplicaSpec (training-operator common_types.go
// and mpi-operator v2beta1 types.go share its fields).
type ReplicaSpec struct {
	Replicas      *int32                 `json:"replicas,omitempty"`
	Template      corev1.PodTemplateSpec `json:"template,omitempty"`
	RestartPolicy string                 `json:"restartPolicy,omitempty"`
}

// RunPolicy is Kubeflow's RunPolicy; the MPI Operator v2beta1 has the same fields.
type RunPolicy struct {
	CleanPodPolicy          *string           `json:"cleanPodPolicy,omitempty"`
	TTLSecondsAfterFinished *int32            `json:"ttlSecondsAfterFinished,omitempty"`
	ActiveDeadlineSeconds   *int64            `json:"activeDeadlineSeconds,omitempty"`
	BackoffLimit            *int32            `json:"backoffLimit,omitempty"`
	SchedulingPolicy        *SchedulingPolicy `json:"schedulingPolicy,omitempty"`
	Suspend                 *bool             `json:"suspend,omitempty"`
	ManagedBy               *string           `json:"managedBy,omitempty"`
	// FailurePolicy is trainstep's own (Kubeflow has none): what a failure
	// restarts and what it costs, set in the manifest or with --set.
	FailurePolicy *v1alpha1.FailurePolicy `json:"failurePolicy,omitempty"`
}

// SchedulingPolicy is Kubeflow's SchedulingPolicy, plus trainstep's own
// gang and workloadPriorityClass fields: Kubeflow picks the gang scheduler
// operator-wide, trainstep per job (spec.runPolicy.schedulingPolicy.gang,
// or --gang).
type SchedulingPolicy struct {
	Gang                   string               `json:"gang,omitempty"`
	MinAvailable           *int32               `json:"minAvailable,omitempty"`
	Queue                  string               `json:"queue,omitempty"`
	MinResources           *corev1.ResourceList `json:"minResources,omitempty"`
	PriorityClass          string               `json:"priorityClass,omitempty"`
	ScheduleTimeoutSeconds *int32               `json:"scheduleTimeoutSeconds,omitempty"`
	WorkloadPriorityClass  string               `json:"workloadPriorityClass,omitempty"`
}

// Header is what every manifest shares. Status is accepted (a manifest
// exported from a cluster carries one) and ignored.
type Header struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            json.RawMessage `json:"status,omitempty"`
}
