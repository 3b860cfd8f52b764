package bench

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// The sweep scenario's pods, the trials' replicas and their steps' pods,
// run on nodes of their own: labelled and tainted SweepPool.
const (
	SweepPoolKey = "bench.trainstep.dev/pool"
	SweepPool    = "sweep"
	// ResourceGPU is what each replica of a trial under a quota asks for one of.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
)

// Trial sizes: trial i has MinTrialWorkers + i mod 5 workers, 4 to 8.
const (
	MinTrialWorkers = 4
	MaxTrialWorkers = 8
)

// TrialSpec is one trial of the sweep scenario: a TensorFlow TrainJob of
// Workers workers on the sweep pool, every worker exiting 0 ExitAfter after
// it started running (worker 0's end decides the job).
type TrialSpec struct {
	Name      string
	Workers   int
	ExitAfter string
	// Gang is the job's gang kind (none when empty); Queue names Kueue's
	// LocalQueue under GangKueue.
	Gang  v1alpha1.GangKind
	Queue string
	// GPU: every worker asks for one ResourceGPU, which a quota counts.
	GPU bool
}

// SweepTrials are n trials named sweep-0 … sweep-<n-1>: names of which
// one is the start of others (sweep-1, sweep-10, …), so a step that took
// a job's objects by their names' prefix would meet another trial's.
func SweepTrials(n int, exitAfter string, gang v1alpha1.GangKind, queue string, gpu bool) []TrialSpec {
	trials := make([]TrialSpec, n)
	for i := range trials {
		trials[i] = TrialSpec{Name: fmt.Sprintf("sweep-%d", i), Workers: MinTrialWorkers + i%(MaxTrialWorkers-MinTrialWorkers+1),
			ExitAfter: exitAfter, Gang: gang, Queue: queue, GPU: gpu}
	}
	return trials
}

// TotalWorkers is how many replicas the trials have in all.
func TotalWorkers(trials []TrialSpec) int {
	n := 0
	for _, t := range trials {
		n += t.Workers
	}
	return n
}

// QuarterQuota is a GPU quota that fits only a quarter of the trials'
// replicas: about a quarter of the gangs at once.
func QuarterQuota(trials []TrialSpec) int64 { return int64((TotalWorkers(trials) + 3) / 4) }

// IdentityArgs are the flags that make a trial's run take only its own
// job's objects: its job name and owner identity, the same across a retry
// of the step (as a workflow step's node is), so that a retry re-attaches.
// It is the one place the trial's owner identity is passed.
func (s TrialSpec) IdentityArgs() []string {
	return []string{"--name", s.Name, "--identity", "bench-sweep/" + s.Name}
}

// Manifest is the TrainJob YAML `trainstep run -f` reads.
func (s TrialSpec) Manifest() ([]byte, error) {
	replicas := int32(s.Workers)
	container := corev1.Container{
		Name:    testutil.ContainerName(v1alpha1.FrameworkTensorFlow),
		Image:   "registry.example/train:1",
		Command: []string{"python", "train.py"},
	}
	if s.GPU {
		gpu := corev1.ResourceList{ResourceGPU: resource.MustParse("1")}
		container.Resources = corev1.ResourceRequirements{Requests: gpu, Limits: gpu}
	}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationExitAfter: s.ExitAfter}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{SweepPoolKey: SweepPool},
			Tolerations:  []corev1.Toleration{sweepToleration},
			Containers:   []corev1.Container{container},
		},
	}
	job := v1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name},
		Spec: v1alpha1.TrainJobSpec{
			Framework: v1alpha1.FrameworkTensorFlow,
			ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
				v1alpha1.ReplicaTypeWorker: {Replicas: &replicas, Template: template},
			},
		},
	}
	if s.Gang != "" {
		job.Spec.RunPolicy.SchedulingPolicy = &v1alpha1.SchedulingPolicy{Gang: s.Gang, Queue: s.Queue}
	}
	out, err := yaml.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("encoding trial %s: %w", s.Name, err)
	}
	return out, nil
}

// DecidingPod is worker 0, whose end decides the trial's job.
func (s TrialSpec) DecidingPod() string { return render.PodName(s.Name, v1alpha1.ReplicaTypeWorker, 0) }

var sweepToleration = corev1.Toleration{Key: SweepPoolKey, Operator: corev1.TolerationOpEqual, Value: SweepPool, Effect: corev1.TaintEffectNoSchedule}

// StepPodLabel marks the pods that stand for the trials' Argo step pods,
// with the trial's name.
const StepPodLabel = "bench.trainstep.dev/step-of"

// StepPod stands for the Argo step pod of a trial's attempt: the pod
// trainstep runs in, given to it as --owner-pod, which owns the job's
// objects and receives its Events. It runs on the sweep pool for as long
// as it exists and asks for what the train template's step asks for.
func StepPod(ns string, trial TrialSpec, attempt int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("step-%s-%d", trial.Name, attempt), Namespace: ns,
			Labels: map[string]string{StepPodLabel: trial.Name},
		},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{SweepPoolKey: SweepPool},
			Tolerations:                   []corev1.Toleration{sweepToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.example/trainstep:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
			}},
		},
	}
}
