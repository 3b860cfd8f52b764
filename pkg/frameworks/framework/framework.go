// Package framework is what every training framework of trainstep is made
// of: the Framework interface that each framework's folder
// (pkg/frameworks/<name>) implements, the values they share (a replica, the
// place a job runs, its success rule) and the helpers they build their
// pods' environment with.
//
// It knows no framework in particular: each one's folder does, and
// pkg/frameworks lists them in one table that the rest of trainstep asks.
// Like the frameworks, it only fills in pod specs and object bodies: it must
// not set object metadata (names, labels, owners: pkg/render does), talk to
// a cluster, read the environment, or use randomness or the clock. The one
// exception is Local.LocalSetup, which the local backend calls to write, on
// its own machine, what a job's pods would mount.
package framework

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// Framework is everything trainstep knows about one training framework.
// The values follow the operator that runs the framework's Kubeflow kind
// (Training Operator v1.9, MPI Operator v2), so that a job moved from
// Kubeflow sees the same environment.
type Framework interface {
	// Name is the framework's spec.framework value.
	Name() v1alpha1.Framework
	// Conventions are the framework's replica types, the container its
	// environment goes on and the port its replicas listen on.
	Conventions() *Conventions
	// Default fills in the framework's own defaults. It runs after the
	// job-wide defaults and every replica's (restart policy, container name,
	// port) are set, and never overwrites a value the job declares.
	Default(job *v1alpha1.TrainJob)
	// Validate checks the framework's own rules of a defaulted job: its
	// fields, and how many replicas each of its types may have.
	Validate(job *v1alpha1.TrainJob) field.ErrorList
	// OwnFields lists the spec fields (and values) only this framework
	// takes, and whether spec sets them: a job of another framework that
	// sets one is invalid.
	OwnFields(spec *v1alpha1.TrainJobSpec) []OwnField
	// FailureRestart is what a retryable failure restarts when the job
	// does not say: the whole job for collective training, the replica
	// alone where the others carry on.
	FailureRestart(job *v1alpha1.TrainJob) v1alpha1.FailureRestart
	// Prepare computes once what every pod of job shares (TF_CONFIG's
	// cluster, peer lists, the coordinator's address), so that configuring
	// one pod then costs the same whatever the job's size.
	Prepare(job *v1alpha1.TrainJob, at Placement) (PodConfigurer, error)
	// SuccessRule says which replicas' success ends the job.
	SuccessRule(job *v1alpha1.TrainJob) SuccessRule
	// Kubeflow lists the Kubeflow kinds the framework reads.
	Kubeflow() []kubeflow.Kind
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

// SharedObjects is implemented by a framework whose pods mount objects of
// the job as a whole (TensorFlow's cluster, MPI's hostfile and SSH key).
type SharedObjects interface {
	// ConfigMaps returns the ConfigMaps the framework's pods mount, with
	// only their name, data and immutability set.
	ConfigMaps(job *v1alpha1.TrainJob, at Placement) ([]*corev1.ConfigMap, error)
	// ConfigMapNames names the ConfigMaps ConfigMaps returns, without
	// computing their data: cheap for any job, valid or not.
	ConfigMapNames(job *v1alpha1.TrainJob, jobName string) []string
	// Secrets returns the Secrets the framework's pods mount, with only
	// their name, type and data set.
	Secrets(job *v1alpha1.TrainJob, at Placement, keys SSHKeyPair) ([]*corev1.Secret, error)
	// Labels are labels the framework's operator puts on the job's shared
	// objects (the job's Service, its ConfigMaps and Secrets), besides
	// trainstep's own; nil for none.
	Labels(jobName string) map[string]string
}

// SSHKeys is implemented by a framework whose replicas log in to each
// other with a key pair the step makes once per job (MPI).
type SSHKeys interface {
	// SSHSecret names the Secret that holds a job's key pair, and the keys
	// of its public key in it: a retried step reads the pair back from it.
	SSHSecret(jobName string) (name, publicKeyKey string)
}

// Elastic is implemented by a framework whose jobs may change their
// number of replicas while they run (elastic PyTorch).
type Elastic interface {
	// Elastic returns the job's elastic bounds; ok is false for a job that
	// is not elastic.
	Elastic(job *v1alpha1.TrainJob) (bounds ElasticBounds, ok bool)
}

// Staged is implemented by a framework one of whose replica types is
// created only once the replicas of another are Ready (MPI's launcher
// under launcherCreationPolicy WaitForWorkersReady).
type Staged interface {
	// HeldUntilReady returns the type held back and the type it waits for;
	// ok is false for a job that holds nothing back.
	HeldUntilReady(job *v1alpha1.TrainJob) (held, awaited v1alpha1.ReplicaType, ok bool)
}

// ElasticBounds are an elastic job's bounds on its replicas of Type.
type ElasticBounds struct {
	// Type is the replica type whose count changes (Worker).
	Type v1alpha1.ReplicaType
	// Min and Max bound the replicas that run; the job starts once Min run.
	Min, Max int32
	// Initial is how many the job starts with: the type's replicas within
	// the bounds.
	Initial int32
	// Grows says the job has a replica for every slot up to Max from the
	// start, placed as capacity frees up; otherwise it has Initial
	// replicas, or follows its metrics.
	Grows bool
	// OnMetrics says the count follows metrics (the HPA's algorithm),
	// starting at Initial.
	OnMetrics bool
}

// Slots is how many replicas of the elastic type trainstep may create: Max
// for a job that grows into capacity or follows metrics, Initial otherwise.
func (b ElasticBounds) Slots() int32 {
	if b.Grows || b.OnMetrics {
		return max(b.Initial, b.Max)
	}
	return b.Initial
}

// AtStart is how many replicas of the elastic type a gang waits for at the
// job's start: every slot of a job that grows into capacity, Initial
// otherwise.
func (b ElasticBounds) AtStart() int32 {
	if b.OnMetrics || !b.Grows {
		return b.Initial
	}
	return b.Slots()
}

// OwnField is a spec field, or a value of one, that only one framework
// takes.
type OwnField struct {
	// Path is the field under spec ("nprocPerNode").
	Path string
	// Set says whether the spec sets it.
	Set bool
	// What says what is only the framework's when not the field as a whole
	// ("AllWorkers"); "" for the field.
	What string
}

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

// SSHKeyPair is the key pair replicas log in to each other with: the
// private key in PEM and the public key in authorized_keys format.
type SSHKeyPair struct {
	Private []byte
	Public  []byte
}
