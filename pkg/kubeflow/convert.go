package kubeflow

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// Kubeflow's default cleanPodPolicy is None for every supported kind
// (training-operator v1.9 SetDefaults_TFJob and the others, mpi-operator v2
// setDefaultsRunPolicy), but there the pods kept go when the user deletes
// the job object. In a step nobody deletes one: the step's end is where the
// job object would go, so an unset cleanPodPolicy means Running here, as in
// a TrainJob, and the converter says so.
const stepDefaultCleanPodPolicy = v1alpha1.CleanPodPolicyRunning

// Converter converts the parts every Kubeflow manifest shares and collects
// warnings about what changes nothing, for one manifest.
type Converter struct {
	warnings []string
}

// Warnf adds a warning.
func (c *Converter) Warnf(format string, args ...any) {
	c.warnings = append(c.warnings, fmt.Sprintf(format, args...))
}

// Warnings returns the warnings collected so far.
func (c *Converter) Warnings() []string { return c.warnings }

// NewTrainJob starts the TrainJob of a manifest of framework f: its
// metadata, and what its labels say of the job (jobLabels).
func (c *Converter) NewTrainJob(h *Header, f v1alpha1.Framework) *v1alpha1.TrainJob {
	c.jobLabels(h.Labels)
	return &v1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: *h.ObjectMeta.DeepCopy(),
		Spec:       v1alpha1.TrainJobSpec{Framework: f},
	}
}

// jobLabels says what becomes of the manifest's labels. Kueue's queue and
// priority-class labels put the job in that queue (defaulting reads them
// into spec.runPolicy.schedulingPolicy); the others stay on the job's
// metadata only: the Training Operator puts a job's labels on none of its
// pods either.
func (c *Converter) jobLabels(labels map[string]string) {
	var others []string
	for k := range labels {
		if k != v1alpha1.LabelKueueQueueName && k != v1alpha1.LabelKueuePriorityClass {
			others = append(others, k)
		}
	}
	if len(others) == 0 {
		return
	}
	sort.Strings(others)
	c.Warnf("metadata.labels %s are put on no replica, as the Training Operator puts a job's labels on none of its pods; "+
		"labels the pods need go in the pod templates", strings.Join(others, ", "))
}

// ReplicaSpecs converts a replica map. specsPath is the manifest's own
// field (spec.tfReplicaSpecs, …) for warnings; defaultContainer is the
// container name the Training Operator requires ("" for MPI).
func (c *Converter) ReplicaSpecs(in map[string]*ReplicaSpec, specsPath, defaultContainer string) map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec {
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
			Replicas:      Copy(spec.Replicas),
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
func (c *Converter) checkDefaultContainer(spec *ReplicaSpec, path, name string) {
	containers := spec.Template.Spec.Containers
	if name == "" || len(containers) == 0 {
		return
	}
	for _, ctr := range containers {
		if ctr.Name == name {
			return
		}
	}
	c.Warnf("%s: no container named %q (the Training Operator requires one); trainstep uses the first container, %q",
		path, name, containers[0].Name)
}

// RunPolicy converts the run policy.
func (c *Converter) RunPolicy(in RunPolicy) v1alpha1.RunPolicy {
	out := v1alpha1.RunPolicy{
		TTLSecondsAfterFinished: Copy(in.TTLSecondsAfterFinished),
		ActiveDeadlineSeconds:   Copy(in.ActiveDeadlineSeconds),
		BackoffLimit:            Copy(in.BackoffLimit),
		Suspend:                 Copy(in.Suspend),
	}
	if in.FailurePolicy != nil {
		out.FailurePolicy = in.FailurePolicy.DeepCopy()
	}
	policy := stepDefaultCleanPodPolicy
	if in.CleanPodPolicy != nil {
		policy = v1alpha1.CleanPodPolicy(*in.CleanPodPolicy)
	} else {
		c.Warnf("spec.runPolicy.cleanPodPolicy is unset: replicas still running when the step ends are deleted (Running), " +
			"where the operator's default None would keep them until the job object is deleted; in a workflow nothing deletes one")
	}
	out.CleanPodPolicy = &policy
	if in.TTLSecondsAfterFinished != nil {
		c.Warnf("spec.runPolicy.ttlSecondsAfterFinished is ignored: trainstep cleans up when the step ends, as cleanPodPolicy says")
	}
	if in.ManagedBy != nil {
		c.Warnf("spec.runPolicy.managedBy is ignored: trainstep runs the job itself")
	}
	if sp := in.SchedulingPolicy; sp != nil {
		out.SchedulingPolicy = &v1alpha1.SchedulingPolicy{
			Gang:                   v1alpha1.GangKind(sp.Gang),
			MinAvailable:           Copy(sp.MinAvailable),
			Queue:                  sp.Queue,
			PriorityClass:          sp.PriorityClass,
			ScheduleTimeoutSeconds: Copy(sp.ScheduleTimeoutSeconds),
			WorkloadPriorityClass:  sp.WorkloadPriorityClass,
		}
		if sp.MinResources != nil {
			res := sp.MinResources.DeepCopy()
			out.SchedulingPolicy.MinResources = &res
		}
	}
	return out
}

// ServiceLayout is the manifest's spec.serviceLayout, else the Training
// Operator's layout, one Service per replica, under which the env is the
// operator's byte for byte.
func ServiceLayout(in string) v1alpha1.ServiceLayout {
	if in == "" {
		return v1alpha1.ServiceLayoutPerReplica
	}
	return v1alpha1.ServiceLayout(in)
}

// Copy returns a pointer to a copy of *p, or nil.
func Copy[T any](p *T) *T {
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

// Replicas are what a Training Operator kind says of its replicas.
type Replicas struct {
	// Specs is the replica map, Field its path (spec.tfReplicaSpecs).
	Specs map[string]*ReplicaSpec
	Field string
	// Container is the container name the operator requires.
	Container string
}

// Job starts the TrainJob of a Training Operator manifest of framework f:
// its metadata and labels, replicas, run policy and service layout (the
// operator's, one Service per replica, unless the manifest says).
func (c *Converter) Job(h *Header, f v1alpha1.Framework, replicas Replicas, runPolicy RunPolicy, layout string) *v1alpha1.TrainJob {
	job := c.NewTrainJob(h, f)
	job.Spec.ReplicaSpecs = c.ReplicaSpecs(replicas.Specs, replicas.Field, replicas.Container)
	job.Spec.RunPolicy = c.RunPolicy(runPolicy)
	job.Spec.ServiceLayout = ServiceLayout(layout)
	return job
}
