// Package kubeflow reads Kubeflow training manifests — kubeflow.org/v1
// TFJob, PyTorchJob, JAXJob, XGBoostJob and kubeflow.org/v2beta1 MPIJob —
// and converts them to a TrainJob, keeping the defaults the Kubeflow
// Training Operator v1.9 and the MPI Operator v2 would apply.
//
// The types here mirror only the spec fields of those kinds, so that a
// strict decoder rejects anything Kubeflow would not accept. The package
// does no I/O, never talks to a cluster, and does not validate the result:
// callers default and validate the TrainJob it returns.
package kubeflow

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// API versions of the supported kinds.
const (
	APIVersionV1      = "kubeflow.org/v1"
	APIVersionV2beta1 = "kubeflow.org/v2beta1"
)

// Kinds of the supported manifests.
const (
	KindTFJob      = "TFJob"
	KindPyTorchJob = "PyTorchJob"
	KindJAXJob     = "JAXJob"
	KindXGBoostJob = "XGBoostJob"
	KindMPIJob     = "MPIJob"
)

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
// gang field: Kubeflow picks the gang scheduler operator-wide, trainstep
// per job (spec.runPolicy.schedulingPolicy.gang, or --gang).
type SchedulingPolicy struct {
	Gang                   string               `json:"gang,omitempty"`
	MinAvailable           *int32               `json:"minAvailable,omitempty"`
	Queue                  string               `json:"queue,omitempty"`
	MinResources           *corev1.ResourceList `json:"minResources,omitempty"`
	PriorityClass          string               `json:"priorityClass,omitempty"`
	ScheduleTimeoutSeconds *int32               `json:"scheduleTimeoutSeconds,omitempty"`
}

// Header is what every manifest shares. Status is accepted (a manifest
// exported from a cluster carries one) and ignored.
type Header struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            json.RawMessage `json:"status,omitempty"`
}

// TFJob is kubeflow.org/v1 TFJob.
type TFJob struct {
	Header `json:",inline"`
	Spec   TFJobSpec `json:"spec"`
}

// TFJobSpec is TFJob's spec.
type TFJobSpec struct {
	RunPolicy           RunPolicy               `json:"runPolicy"`
	SuccessPolicy       *string                 `json:"successPolicy,omitempty"`
	TFReplicaSpecs      map[string]*ReplicaSpec `json:"tfReplicaSpecs"`
	EnableDynamicWorker bool                    `json:"enableDynamicWorker,omitempty"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerReplica,
	// the operator's layout and this kind's default, or PerJob.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// PyTorchJob is kubeflow.org/v1 PyTorchJob.
type PyTorchJob struct {
	Header `json:",inline"`
	Spec   PyTorchJobSpec `json:"spec"`
}

// PyTorchJobSpec is PyTorchJob's spec. Its elasticPolicy has exactly the
// fields of the TrainJob's.
type PyTorchJobSpec struct {
	RunPolicy           RunPolicy               `json:"runPolicy"`
	ElasticPolicy       *v1alpha1.ElasticPolicy `json:"elasticPolicy,omitempty"`
	PyTorchReplicaSpecs map[string]*ReplicaSpec `json:"pytorchReplicaSpecs"`
	NprocPerNode        *string                 `json:"nprocPerNode,omitempty"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerReplica,
	// the operator's layout and this kind's default, or PerJob.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// JAXJob is kubeflow.org/v1 JAXJob.
type JAXJob struct {
	Header `json:",inline"`
	Spec   JAXJobSpec `json:"spec"`
}

// JAXJobSpec is JAXJob's spec.
type JAXJobSpec struct {
	RunPolicy       RunPolicy               `json:"runPolicy"`
	JAXReplicaSpecs map[string]*ReplicaSpec `json:"jaxReplicaSpecs"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerReplica,
	// the operator's layout and this kind's default, or PerJob.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// XGBoostJob is kubeflow.org/v1 XGBoostJob.
type XGBoostJob struct {
	Header `json:",inline"`
	Spec   XGBoostJobSpec `json:"spec"`
}

// XGBoostJobSpec is XGBoostJob's spec.
type XGBoostJobSpec struct {
	RunPolicy       RunPolicy               `json:"runPolicy"`
	XGBReplicaSpecs map[string]*ReplicaSpec `json:"xgbReplicaSpecs"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerReplica,
	// the operator's layout and this kind's default, or PerJob.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}

// MPIJob is kubeflow.org/v2beta1 MPIJob (MPI Operator v2).
type MPIJob struct {
	Header `json:",inline"`
	Spec   MPIJobSpec `json:"spec"`
}

// MPIJobSpec is MPIJob v2beta1's spec.
type MPIJobSpec struct {
	SlotsPerWorker         *int32                  `json:"slotsPerWorker,omitempty"`
	RunLauncherAsWorker    *bool                   `json:"runLauncherAsWorker,omitempty"`
	RunPolicy              RunPolicy               `json:"runPolicy,omitempty"`
	MPIReplicaSpecs        map[string]*ReplicaSpec `json:"mpiReplicaSpecs"`
	SSHAuthMountPath       string                  `json:"sshAuthMountPath,omitempty"`
	LauncherCreationPolicy string                  `json:"launcherCreationPolicy,omitempty"`
	MPIImplementation      string                  `json:"mpiImplementation,omitempty"`
	// ServiceLayout is trainstep's own (spec.serviceLayout): PerJob, the
	// MPI Operator's layout and the only one MPI runs under.
	ServiceLayout string `json:"serviceLayout,omitempty"`
}
