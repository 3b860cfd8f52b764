package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/gang"
)

// Renderer renders one job's objects one at a time, so that a caller never
// needs to hold every rendered pod of a large job.
//
// NewRenderer does once the work every replica shares: the framework's
// shared environment (TensorFlow's cluster addresses, XGBoost's worker
// list), the gang settings, each replica type's Service ports. After that,
// Pod and Service render one replica in time and allocations that do not
// grow with the job's size (only the bytes of a TF_CONFIG grow, as its
// value lists every replica).
//
// The intended use by a controller creating a job:
//
//	r, err := render.NewRenderer(job, id)
//	shared, err := r.SharedObjects(inputs) // Secrets, ConfigMaps, PodGroup, the job's Service: create first
//	for _, ref := range r.Replicas() {     // in creation order; N small values
//		// in a worker of the create pool, rendering just before creating:
//		svc, err := r.Service(ref.Type, ref.Index) // nil when the job has one job-wide Service
//		pod, err := r.Pod(ref.Type, ref.Index, 0)
//	}
//
// so that at most the pool's parallelism of rendered pods is alive at once.
// A recreated replica is rendered again with its attempt number. A Renderer
// holds no rendered object, never changes after NewRenderer, and is safe for
// concurrent use; the objects it returns share no memory the caller may
// modify (only immutable strings such as the TF_CONFIG cluster text).
//
// Render and the package function Pod are built on it and return the same
// objects, byte for byte.
type Renderer struct {
	job  *v1alpha1.TrainJob
	id   Identity
	pods frameworks.PodConfigurer
	gang gang.PodSettings
	// layout is the job's service layout.
	layout v1alpha1.ServiceLayout
	// ports are the Service ports of each replica type (per-replica
	// Service layout only).
	ports map[v1alpha1.ReplicaType][]corev1.ServicePort
}

// NewRenderer prepares job, defaulted (frameworks.SetDefaults) and validated
// (frameworks.Validate), for rendering into the namespace and with the owner
// and labels of id, which it copies. The job must not change while the
// Renderer is in use.
func NewRenderer(job *v1alpha1.TrainJob, id Identity) (*Renderer, error) {
	id = copyIdentity(id)
	for _, rt := range frameworks.SortedReplicaTypes(job) {
		if job.Spec.ReplicaSpecs[rt] == nil {
			return nil, fmt.Errorf("rendering job %q: replica type %s has no spec", id.JobName, rt)
		}
	}
	pods, err := frameworks.Prepare(job, placement(id))
	if err != nil {
		return nil, fmt.Errorf("rendering job %q: %w", id.JobName, err)
	}
	r := &Renderer{job: job, id: id, pods: pods, gang: gang.ForPods(job, id.JobName), layout: job.Spec.ServiceLayoutOrDefault()}
	if r.layout == v1alpha1.ServiceLayoutPerReplica {
		r.ports = make(map[v1alpha1.ReplicaType][]corev1.ServicePort, len(job.Spec.ReplicaSpecs))
		for rt := range job.Spec.ReplicaSpecs {
			r.ports[rt] = servicePorts(job, rt)
		}
	}
	return r, nil
}

// Identity is where the objects go and who owns them, as rendered.
func (r *Renderer) Identity() Identity { return copyIdentity(r.id) }

// Replicas lists every replica of the job in creation order
// (frameworks.AllReplicas).
func (r *Renderer) Replicas() []frameworks.ReplicaRef {
	return frameworks.AllReplicas(r.job)
}

// PodObject is what to send to create pod, a Pod this Renderer rendered
// (and the caller may have changed since): the pod itself, or for a job
// gang-scheduled by Kubernetes its unstructured form, which carries the
// spec.schedulingGroup the typed Pod cannot (gang.PodObject).
func (r *Renderer) PodObject(pod *corev1.Pod) (runtime.Object, error) {
	return gang.PodObject(pod, r.gang.SchedulingGroup)
}

// Service renders the headless Service of replica index of type rt, named
// like its pod. It returns nil, and no error, for a job under the per-job
// layout, which has one job-wide Service instead: SharedObjects holds it.
func (r *Renderer) Service(rt v1alpha1.ReplicaType, index int) (*corev1.Service, error) {
	if err := checkReplica(r.job, "service", rt, index); err != nil {
		return nil, err
	}
	if r.layout != v1alpha1.ServiceLayoutPerReplica {
		return nil, nil
	}
	name := PodName(r.id.JobName, rt, index)
	return headlessService(r.id, name, ReplicaLabels(r.id, rt, index), ReplicaLabels(r.id, rt, index), r.ports[rt]), nil
}

// SharedObjects renders the objects of the job as a whole, which exist
// once whatever the number of replicas: the framework's Secrets and
// ConfigMaps, the job-wide Service under the per-job layout, and the
// PodGroup of a gang job. Its Pods are empty, and so are its Services
// under the per-replica layout.
func (r *Renderer) SharedObjects(in Inputs) (*Objects, error) {
	at := placement(r.id)
	objs := &Objects{}
	if r.layout == v1alpha1.ServiceLayoutPerJob {
		objs.Services = []*corev1.Service{headlessService(r.id, r.id.JobName, sharedLabels(r.job, r.id), JobLabels(r.id), nil)}
	}
	configMaps, err := frameworks.ConfigMaps(r.job, at)
	if err != nil {
		return nil, fmt.Errorf("rendering job %q: %w", r.id.JobName, err)
	}
	for _, cm := range configMaps {
		if err := checkConfigMapSize(r.job, cm); err != nil {
			return nil, fmt.Errorf("rendering job %q: %w", r.id.JobName, err)
		}
		cm.TypeMeta = typeMeta("ConfigMap")
		cm.ObjectMeta = jobObjectMeta(r.id, cm.Name, sharedLabels(r.job, r.id))
		objs.ConfigMaps = append(objs.ConfigMaps, cm)
	}
	secrets, err := frameworks.Secrets(r.job, at, frameworks.SSHKeyPair{Private: in.SSHPrivateKey, Public: in.SSHPublicKey})
	if err != nil {
		return nil, fmt.Errorf("rendering job %q: %w", r.id.JobName, err)
	}
	for _, s := range secrets {
		s.TypeMeta = typeMeta("Secret")
		s.ObjectMeta = jobObjectMeta(r.id, s.Name, sharedLabels(r.job, r.id))
		objs.Secrets = append(objs.Secrets, s)
	}
	if r.id.TrainerStatus != nil {
		secrets, service, err := r.trainerStatusObjects(in)
		if err != nil {
			return nil, err
		}
		objs.Secrets = append(objs.Secrets, secrets...)
		objs.Services = append(objs.Services, service)
	}
	objs.PodGroup = gang.PodGroup(r.job, jobObjectMeta(r.id, r.id.JobName, JobLabels(r.id)))
	return objs, nil
}

// MaxConfigMapSize is the most bytes of data (values of data and
// binaryData) the API server accepts in one ConfigMap.
const MaxConfigMapSize = 1 << 20

// checkConfigMapSize rejects a ConfigMap the API server would refuse: MPI's
// hostfile lists every worker by its full DNS name.
func checkConfigMapSize(job *v1alpha1.TrainJob, cm *corev1.ConfigMap) error {
	size := 0
	for _, v := range cm.Data {
		size += len(v)
	}
	for _, v := range cm.BinaryData {
		size += len(v)
	}
	if size > MaxConfigMapSize {
		return fmt.Errorf("spec.replicaSpecs: with %d replicas ConfigMap %s would hold %d bytes, and the API server accepts at most %d: run fewer replicas or shorten the job name or namespace",
			frameworks.TotalReplicas(job), cm.Name, size, MaxConfigMapSize)
	}
	return nil
}

// copyIdentity copies id's labels and owner, so a caller changing its own
// afterwards does not change what a Renderer renders.
func copyIdentity(id Identity) Identity {
	if id.Labels != nil {
		labels := make(map[string]string, len(id.Labels))
		for k, v := range id.Labels {
			labels[k] = v
		}
		id.Labels = labels
	}
	if id.Owner != nil {
		id.Owner = id.Owner.DeepCopy()
	}
	if id.TrainerStatus != nil {
		endpoint := *id.TrainerStatus
		id.TrainerStatus = &endpoint
	}
	return id
}
