// Package frameworks holds the conventions of each supported training
// framework, one file each: the environment its processes read, the ports
// they listen on, how its replicas find each other (peer addresses, extra
// ConfigMaps and Secrets) and which replicas decide that the job succeeded.
//
// The values follow the Kubeflow Training Operator v1.9 and MPI Operator v2
// so that a job moved from Kubeflow sees the same environment.
//
// This package only fills in pod specs and object bodies. It must not set
// object metadata (names, labels, owners: pkg/render does that), talk to a
// cluster, read the environment, or use randomness or the clock.
package frameworks

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// ReplicaRef names one replica: its type and index.
type ReplicaRef struct {
	Type  v1alpha1.ReplicaType
	Index int
}

// String spells the replica as metricsFrom does: "Worker/0".
func (r ReplicaRef) String() string { return fmt.Sprintf("%s/%d", r.Type, r.Index) }

// Placement is where a job's replicas run: the names they reach each other by.
type Placement struct {
	JobName   string
	Namespace string
}

// SSHKeyPair is the key pair MPI replicas log in to each other with: the
// private key in PEM and the public key in authorized_keys format.
type SSHKeyPair struct {
	Private []byte
	Public  []byte
}

// PeerHost is the DNS name the other replicas reach replica index of type
// rt by: under the per-replica layout its own Service's name, the pod's
// name ("<job>-worker-0", as the Training Operator writes it); under the
// per-job layout the pod's hostname in the job's Service ("<job>-worker-0.<job>").
// Both resolve through the pods' DNS search path, "<ns>.svc.<cluster domain>".
func PeerHost(job *v1alpha1.TrainJob, at Placement, rt v1alpha1.ReplicaType, index int) string {
	name := v1alpha1.ReplicaName(at.JobName, rt, index)
	if job.Spec.ServiceLayoutOrDefault() == v1alpha1.ServiceLayoutPerJob {
		return name + "." + at.JobName
	}
	return name
}

// Framework is one training framework's conventions.
type Framework interface {
	// Prepare computes once what every pod of job shares (TF_CONFIG's
	// cluster, peer lists, the coordinator's address), so that configuring
	// one pod then costs the same whatever the job's size.
	Prepare(job *v1alpha1.TrainJob, at Placement) (PodConfigurer, error)
	// ConfigurePod configures one pod as Prepare(job, at) followed by its
	// ConfigurePod: fine for one replica, but a caller configuring every
	// replica prepares the job once instead.
	ConfigurePod(job *v1alpha1.TrainJob, at Placement, replica ReplicaRef, spec *corev1.PodSpec) error
	// ConfigMaps returns the ConfigMaps the framework's pods mount, with
	// only their name and data set.
	ConfigMaps(job *v1alpha1.TrainJob, at Placement) []*corev1.ConfigMap
	// Secrets returns the Secrets the framework's pods mount, with only
	// their name, type and data set.
	Secrets(job *v1alpha1.TrainJob, at Placement, keys SSHKeyPair) ([]*corev1.Secret, error)
	// SuccessRule says which replicas' success ends the job.
	SuccessRule(job *v1alpha1.TrainJob) SuccessRule
}

// PodConfigurer configures the pods of one prepared job. It only reads what
// Prepare computed, so one PodConfigurer may configure pods concurrently.
type PodConfigurer interface {
	// ConfigurePod adds the framework's environment, volumes and DNS
	// settings to spec, a deep copy of the replica's pod template owned by
	// the caller. Values shared by every pod (strings) may be shared between
	// the specs; nothing the caller may modify is.
	ConfigurePod(replica ReplicaRef, spec *corev1.PodSpec) error
}

// configureOne prepares job and configures one pod.
func configureOne(fw Framework, job *v1alpha1.TrainJob, at Placement, replica ReplicaRef, spec *corev1.PodSpec) error {
	pods, err := fw.Prepare(job, at)
	if err != nil {
		return err
	}
	return pods.ConfigurePod(replica, spec)
}

// For returns the conventions of framework fw.
func For(fw v1alpha1.Framework) (Framework, error) {
	switch fw {
	case v1alpha1.FrameworkTensorFlow:
		return tensorflow{}, nil
	case v1alpha1.FrameworkPyTorch:
		return pytorch{}, nil
	case v1alpha1.FrameworkMPI:
		return mpi{}, nil
	case v1alpha1.FrameworkJAX:
		return jax{}, nil
	case v1alpha1.FrameworkXGBoost:
		return xgboost{}, nil
	}
	return nil, fmt.Errorf("unsupported framework %q: supported are %s", fw, supportedFrameworks())
}

func supportedFrameworks() string {
	names := make([]string, len(v1alpha1.Frameworks))
	for i, fw := range v1alpha1.Frameworks {
		names[i] = string(fw)
	}
	return strings.Join(names, ", ")
}

// noExtraObjects is embedded by frameworks whose replicas need nothing but
// pods and Services.
type noExtraObjects struct{}

func (noExtraObjects) ConfigMaps(*v1alpha1.TrainJob, Placement) []*corev1.ConfigMap { return nil }

func (noExtraObjects) Secrets(*v1alpha1.TrainJob, Placement, SSHKeyPair) ([]*corev1.Secret, error) {
	return nil, nil
}

// Replicas returns how many replicas of type rt the job runs: 0 when the
// type is absent, 1 when unset (the API's default), never negative; an
// elastic job's workers up to maxReplicas (v1alpha1.ReplicaSlots).
func Replicas(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) int {
	return max(0, int(v1alpha1.ReplicaSlots(job, rt)))
}

// TotalReplicas returns how many replicas of every type the job runs.
func TotalReplicas(job *v1alpha1.TrainJob) int {
	return int(v1alpha1.TotalReplicas(job))
}

// Port returns the port replicas of type rt listen on: the main container's
// port named as the framework names it (tfjob-port, pytorchjob-port, …),
// else the framework's default port.
func Port(job *v1alpha1.TrainJob, rt v1alpha1.ReplicaType) int32 {
	name, port := v1alpha1.DefaultPort(job.Spec.Framework)
	if job.Spec.ReplicaSpecs[rt] == nil {
		return port
	}
	if c := v1alpha1.MainContainer(job, rt); c != nil {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
	}
	return port
}

// MainContainer returns the container of spec (a copy of a replica's pod
// template) that the framework's env and port go on, or nil when spec has
// no container. It picks the same container v1alpha1.MainContainer picks
// in the job's template.
func MainContainer(fw v1alpha1.Framework, spec *corev1.PodSpec) *corev1.Container {
	i := v1alpha1.MainContainerIndex(spec, v1alpha1.DefaultContainerName(fw))
	if i < 0 {
		return nil
	}
	return &spec.Containers[i]
}

// appendToEveryContainer appends env to every (non-init) container, as the
// Training Operator does for PyTorch, JAX and XGBoost.
func appendToEveryContainer(spec *corev1.PodSpec, env []corev1.EnvVar) {
	for i := range spec.Containers {
		spec.Containers[i].Env = append(spec.Containers[i].Env, env...)
	}
}

// MaxEnvVarSize is the most bytes Linux passes a new process in one
// environment string, "NAME=value" and its terminating NUL (MAX_ARG_STRLEN:
// 32 pages of 4 KiB). A longer one makes execve fail with E2BIG ("argument
// list too long"), so the container never starts.
const MaxEnvVarSize = 131072

// checkEnvVarSize rejects a variable whose value grows with the job's
// replicas once it no longer fits MaxEnvVarSize; names says which names
// make up each entry.
func checkEnvVarSize(job *v1alpha1.TrainJob, name string, valueLen int, names string) error {
	if size := len(name) + len("=") + valueLen + 1; size > MaxEnvVarSize {
		return fmt.Errorf("spec.replicaSpecs: with %d replicas %s would be %d bytes, and Linux starts no process with an environment variable (NAME=value) over %d bytes: no replica could start; run fewer replicas or shorten %s",
			TotalReplicas(job), name, valueLen, MaxEnvVarSize, names)
	}
	return nil
}

func envVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func itoa(n int) string { return strconv.Itoa(n) }
