package kubeflow

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// Object is a decoded Kubeflow manifest that can become a TrainJob.
type Object interface {
	// ToTrainJob converts the manifest, with Kubeflow's own defaults where
	// they differ from the TrainJob's, and returns warnings about fields
	// that are accepted but change nothing.
	ToTrainJob() (*v1alpha1.TrainJob, []string)
	// ReplicaSpecsField is the spec field holding the replicas
	// (tfReplicaSpecs, …), so errors can name the manifest's own path.
	ReplicaSpecsField() string
}

// ReplicaSpecsField implements Object.
func (*TFJob) ReplicaSpecsField() string { return "tfReplicaSpecs" }

// ReplicaSpecsField implements Object.
func (*PyTorchJob) ReplicaSpecsField() string { return "pytorchReplicaSpecs" }

// ReplicaSpecsField implements Object.
func (*JAXJob) ReplicaSpecsField() string { return "jaxReplicaSpecs" }

// ReplicaSpecsField implements Object.
func (*XGBoostJob) ReplicaSpecsField() string { return "xgbReplicaSpecs" }

// ReplicaSpecsField implements Object.
func (*MPIJob) ReplicaSpecsField() string { return "mpiReplicaSpecs" }

// New returns an empty object of the given apiVersion and kind to decode a
// manifest into, or false when the pair is not a supported Kubeflow kind.
func New(apiVersion, kind string) (Object, bool) {
	switch apiVersion + " " + kind {
	case APIVersionV1 + " " + KindTFJob:
		return &TFJob{}, true
	case APIVersionV1 + " " + KindPyTorchJob:
		return &PyTorchJob{}, true
	case APIVersionV1 + " " + KindJAXJob:
		return &JAXJob{}, true
	case APIVersionV1 + " " + KindXGBoostJob:
		return &XGBoostJob{}, true
	case APIVersionV2beta1 + " " + KindMPIJob:
		return &MPIJob{}, true
	}
	return nil, false
}

// Supported lists the Kubeflow kinds New accepts, for error messages.
func Supported() []string {
	return []string{
		APIVersionV1 + " " + KindTFJob,
		APIVersionV1 + " " + KindPyTorchJob,
		APIVersionV1 + " " + KindJAXJob,
		APIVersionV1 + " " + KindXGBoostJob,
		APIVersionV2beta1 + " " + KindMPIJob,
	}
}

// Kubeflow's default cleanPodPolicy is None for every supported kind
// (training-operator v1.9 SetDefaults_TFJob and the others, mpi-operator v2
// setDefaultsRunPolicy), but there the pods kept go when the user deletes
// the job object. In a step nobody deletes one: the step's end is where the
// job object would go, so an unset cleanPodPolicy means Running here, as in
// a TrainJob, and the converter says so.
const stepDefaultCleanPodPolicy = v1alpha1.CleanPodPolicyRunning

// converter collects warnings while one manifest is converted.
type converter struct {
	warnings []string
}

func (c *converter) warnf(format string, args ...any) {
	c.warnings = append(c.warnings, fmt.Sprintf(format, args...))
}

func (c *converter) newTrainJob(h *Header, f v1alpha1.Framework) *v1alpha1.TrainJob {
	return &v1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: *h.ObjectMeta.DeepCopy(),
		Spec:       v1alpha1.TrainJobSpec{Framework: f},
	}
}

// replicaSpecs converts a replica map. specsPath is the manifest's own
// field (spec.tfReplicaSpecs, …) for warnings; defaultContainer is the
// container name the Training Operator requires ("" for MPI).
func (c *converter) replicaSpecs(in map[string]*ReplicaSpec, specsPath, defaultContainer string) map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec {
	if in == nil {
		return nil
	}
	out := make(map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec, len(in))
	for _, name := range sortedKeys(in) {
		spec := in[name]
		if spec == nil {
			out[v1alpha1.ReplicaType(name)] = nil
			continue
		}
		out[v1alpha1.ReplicaType(name)] = &v1alpha1.ReplicaSpec{
			Replicas:      copyPtr(spec.Replicas),
			RestartPolicy: v1alpha1.RestartPolicy(spec.RestartPolicy),
			Template:      *spec.Template.DeepCopy(),
		}
		c.checkDefaultContainer(spec, fmt.Sprintf("%s.%s.template.spec.containers", specsPath, name), defaultContainer)
	}
	return out
}

// checkDefaultContainer warns when the container the Training Operator
// requires by name is missing: its webhook would reject the manifest, and
// trainstep falls back to the first container.
func (c *converter) checkDefaultContainer(spec *ReplicaSpec, path, name string) {
	containers := spec.Template.Spec.Containers
	if name == "" || len(containers) == 0 {
		return
	}
	for _, ctr := range containers {
		if ctr.Name == name {
			return
		}
	}
	c.warnf("%s: no container named %q (the Training Operator requires one); trainstep uses the first container, %q",
		path, name, containers[0].Name)
}

func (c *converter) runPolicy(in RunPolicy) v1alpha1.RunPolicy {
	out := v1alpha1.RunPolicy{
		TTLSecondsAfterFinished: copyPtr(in.TTLSecondsAfterFinished),
		ActiveDeadlineSeconds:   copyPtr(in.ActiveDeadlineSeconds),
		BackoffLimit:            copyPtr(in.BackoffLimit),
		Suspend:                 copyPtr(in.Suspend),
	}
	if in.FailurePolicy != nil {
		out.FailurePolicy = in.FailurePolicy.DeepCopy()
	}
	policy := stepDefaultCleanPodPolicy
	if in.CleanPodPolicy != nil {
		policy = v1alpha1.CleanPodPolicy(*in.CleanPodPolicy)
	} else {
		c.warnf("spec.runPolicy.cleanPodPolicy is unset: replicas still running when the step ends are deleted (Running), " +
			"where the operator's default None would keep them until the job object is deleted; in a workflow nothing deletes one")
	}
	out.CleanPodPolicy = &policy
	if in.TTLSecondsAfterFinished != nil {
		c.warnf("spec.runPolicy.ttlSecondsAfterFinished is ignored: trainstep cleans up when the step ends, as cleanPodPolicy says")
	}
	if in.ManagedBy != nil {
		c.warnf("spec.runPolicy.managedBy is ignored: trainstep runs the job itself")
	}
	if sp := in.SchedulingPolicy; sp != nil {
		out.SchedulingPolicy = &v1alpha1.SchedulingPolicy{
			Gang:                   v1alpha1.GangKind(sp.Gang),
			MinAvailable:           copyPtr(sp.MinAvailable),
			Queue:                  sp.Queue,
			PriorityClass:          sp.PriorityClass,
			ScheduleTimeoutSeconds: copyPtr(sp.ScheduleTimeoutSeconds),
		}
		if sp.MinResources != nil {
			res := sp.MinResources.DeepCopy()
			out.SchedulingPolicy.MinResources = &res
		}
	}
	return out
}

// ToTrainJob converts a TFJob. Kubeflow's SuccessPolicy "" is Default.
func (j *TFJob) ToTrainJob() (*v1alpha1.TrainJob, []string) {
	c := &converter{}
	job := c.newTrainJob(&j.Header, v1alpha1.FrameworkTensorFlow)
	job.Spec.ReplicaSpecs = c.replicaSpecs(j.Spec.TFReplicaSpecs, "spec.tfReplicaSpecs", v1alpha1.ContainerNameTensorFlow)
	job.Spec.ServiceLayout = serviceLayout(j.Spec.ServiceLayout)
	job.Spec.RunPolicy = c.runPolicy(j.Spec.RunPolicy)
	job.Spec.SuccessPolicy = v1alpha1.SuccessPolicyDefault
	if j.Spec.SuccessPolicy != nil && *j.Spec.SuccessPolicy != "" {
		job.Spec.SuccessPolicy = v1alpha1.SuccessPolicy(*j.Spec.SuccessPolicy)
	}
	if j.Spec.EnableDynamicWorker {
		c.warnf("spec.enableDynamicWorker is ignored: trainstep runs a fixed set of TensorFlow workers")
	}
	return job, c.warnings
}

// ToTrainJob converts a PyTorchJob, keeping both the current nprocPerNode
// and the deprecated elasticPolicy.nProcPerNode as written.
func (j *PyTorchJob) ToTrainJob() (*v1alpha1.TrainJob, []string) {
	c := &converter{}
	job := c.newTrainJob(&j.Header, v1alpha1.FrameworkPyTorch)
	job.Spec.ReplicaSpecs = c.replicaSpecs(j.Spec.PyTorchReplicaSpecs, "spec.pytorchReplicaSpecs", v1alpha1.ContainerNamePyTorch)
	job.Spec.ServiceLayout = serviceLayout(j.Spec.ServiceLayout)
	job.Spec.RunPolicy = c.runPolicy(j.Spec.RunPolicy)
	job.Spec.NprocPerNode = copyPtr(j.Spec.NprocPerNode)
	if ep := j.Spec.ElasticPolicy; ep != nil {
		job.Spec.ElasticPolicy = ep // same type; the decoded manifest is not reused
		if ep.NProcPerNode != nil {
			// The Training Operator v1.9 webhook's deprecation warning.
			c.warnf("spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead")
		}
	}
	return job, c.warnings
}

// ToTrainJob converts a JAXJob.
func (j *JAXJob) ToTrainJob() (*v1alpha1.TrainJob, []string) {
	c := &converter{}
	job := c.newTrainJob(&j.Header, v1alpha1.FrameworkJAX)
	job.Spec.ReplicaSpecs = c.replicaSpecs(j.Spec.JAXReplicaSpecs, "spec.jaxReplicaSpecs", v1alpha1.ContainerNameJAX)
	job.Spec.ServiceLayout = serviceLayout(j.Spec.ServiceLayout)
	job.Spec.RunPolicy = c.runPolicy(j.Spec.RunPolicy)
	return job, c.warnings
}

// ToTrainJob converts an XGBoostJob.
func (j *XGBoostJob) ToTrainJob() (*v1alpha1.TrainJob, []string) {
	c := &converter{}
	job := c.newTrainJob(&j.Header, v1alpha1.FrameworkXGBoost)
	job.Spec.ReplicaSpecs = c.replicaSpecs(j.Spec.XGBReplicaSpecs, "spec.xgbReplicaSpecs", v1alpha1.ContainerNameXGBoost)
	job.Spec.ServiceLayout = serviceLayout(j.Spec.ServiceLayout)
	job.Spec.RunPolicy = c.runPolicy(j.Spec.RunPolicy)
	return job, c.warnings
}

// ToTrainJob converts an MPIJob v2beta1. The MPI Operator defaults an
// unset Worker replicas to 0 (v2beta1 default.go setDefaultsTypeWorker),
// unlike the TrainJob's 1, so the converter sets it explicitly.
func (j *MPIJob) ToTrainJob() (*v1alpha1.TrainJob, []string) {
	c := &converter{}
	job := c.newTrainJob(&j.Header, v1alpha1.FrameworkMPI)
	job.Spec.ReplicaSpecs = c.replicaSpecs(j.Spec.MPIReplicaSpecs, "spec.mpiReplicaSpecs", "")
	if worker := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]; worker != nil && worker.Replicas == nil {
		zero := int32(0)
		worker.Replicas = &zero
	}
	job.Spec.RunPolicy = c.runPolicy(j.Spec.RunPolicy)
	job.Spec.SlotsPerWorker = copyPtr(j.Spec.SlotsPerWorker)
	job.Spec.RunLauncherAsWorker = copyPtr(j.Spec.RunLauncherAsWorker)
	job.Spec.SSHAuthMountPath = j.Spec.SSHAuthMountPath
	job.Spec.MPIImplementation = v1alpha1.MPIImplementation(j.Spec.MPIImplementation)
	job.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationPolicy(j.Spec.LauncherCreationPolicy)
	job.Spec.ServiceLayout = v1alpha1.ServiceLayout(j.Spec.ServiceLayout)
	return job, c.warnings
}

// serviceLayout is the manifest's spec.serviceLayout, else the Training
// Operator's layout, one Service per replica, under which the env is the
// operator's byte for byte. MPIJobs default to the job-wide Service in
// TrainJob defaulting, as the MPI Operator lays them out.
func serviceLayout(in string) v1alpha1.ServiceLayout {
	if in == "" {
		return v1alpha1.ServiceLayoutPerReplica
	}
	return v1alpha1.ServiceLayout(in)
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
