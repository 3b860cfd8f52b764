package frameworks

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/frameworks/paddle"
)

// validJob returns a defaulted, valid job of each framework for the cases
// below to break one field at a time.
func validJob(f v1alpha1.Framework) *v1alpha1.TrainJob {
	types := map[v1alpha1.Framework][]v1alpha1.ReplicaType{
		v1alpha1.FrameworkTensorFlow: {v1alpha1.ReplicaTypePS, v1alpha1.ReplicaTypeWorker},
		v1alpha1.FrameworkPyTorch:    {v1alpha1.ReplicaTypeMaster, v1alpha1.ReplicaTypeWorker},
		v1alpha1.FrameworkMPI:        {v1alpha1.ReplicaTypeLauncher, v1alpha1.ReplicaTypeWorker},
		v1alpha1.FrameworkJAX:        {v1alpha1.ReplicaTypeWorker},
		v1alpha1.FrameworkXGBoost:    {v1alpha1.ReplicaTypeMaster, v1alpha1.ReplicaTypeWorker},
		paddle.Name:                  {v1alpha1.ReplicaTypeMaster, v1alpha1.ReplicaTypeWorker},
	}[f]
	specs := map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{}
	for _, rt := range types {
		replicas := int32(2)
		if rt == v1alpha1.ReplicaTypeMaster || rt == v1alpha1.ReplicaTypeLauncher {
			replicas = 1
		}
		specs[rt] = &v1alpha1.ReplicaSpec{Replicas: &replicas, Template: podWith(container(mustFor(f).Conventions().Container))}
		if f == v1alpha1.FrameworkMPI {
			specs[rt].Template = podWith(container("mpi"))
		}
	}
	job := newJob(f, specs)
	SetDefaults(job)
	return job
}

func TestValidateAcceptsValidJobs(t *testing.T) {
	for _, f := range Names() {
		t.Run(string(f), func(t *testing.T) {
			if errs := Validate(validJob(f)); len(errs) != 0 {
				t.Errorf("valid %s job rejected:\n%s", f, errs.ToAggregate())
			}
		})
	}
}

// Training Operator v1.9 runs a PyTorchJob of workers only, without an
// elasticPolicy (its webhook requires neither a Master nor elasticPolicy).
func TestValidateAcceptsPyTorchWorkersOnly(t *testing.T) {
	job := validJob(v1alpha1.FrameworkPyTorch)
	delete(job.Spec.ReplicaSpecs, v1alpha1.ReplicaTypeMaster)
	if errs := Validate(job); len(errs) != 0 {
		t.Errorf("pytorch job of workers only rejected:\n%s", errs.ToAggregate())
	}
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		name      string
		framework v1alpha1.Framework
		mutate    func(j *v1alpha1.TrainJob)
		want      []string
	}{
		// metadata
		{"missing name", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Name = "" },
			[]string{"metadata.name: Required value: the job needs a name (metadata.name or --name)"}},
		{"name not DNS-1035", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Name = "1mnist" },
			[]string{`metadata.name: Invalid value: "1mnist": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`}},
		{"name too long for the replica names", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) {
			j.Name = strings.Repeat("a", 54) // "-worker-1" makes 63 + 0; "-evaluator-0" makes 66
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeEvaluator] = &v1alpha1.ReplicaSpec{Replicas: ptrTo[int32](1), RestartPolicy: "Never", Template: podWith(container("tensorflow"))}
		}, []string{`metadata.name: Invalid value: "` + strings.Repeat("a", 54) + `": too long: object name "` + strings.Repeat("a", 54) +
			`-evaluator-0" would be 66 characters, the limit is 63; shorten the name to at most 51 characters`}},
		{"replica index widens the name", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			j.Name = strings.Repeat("b", 54) // "-worker-9" fits 63, "-worker-10" does not
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Replicas = ptrTo[int32](11)
		}, []string{`metadata.name: Invalid value: "` + strings.Repeat("b", 54) + `": too long: object name "` + strings.Repeat("b", 54) +
			`-worker-10" would be 64 characters, the limit is 63; shorten the name to at most 53 characters`}},
		{"namespace not DNS-1123", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Namespace = "Team_A" },
			[]string{`metadata.namespace: Invalid value: "Team_A": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		// framework and replica types
		{"unknown framework", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.Framework = "caffe" },
			[]string{`spec.framework: Unsupported value: "caffe": supported values: "tensorflow", "pytorch", "mpi", "jax", "xgboost", "paddle"`}},
		{"no replica specs", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.ReplicaSpecs = nil },
			[]string{"spec.replicaSpecs: Required value: jax needs at least one of Worker"}},
		{"type not allowed for framework", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypePS] = j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]
		}, []string{`spec.replicaSpecs.PS: Unsupported value: "PS": supported values: "Master", "Worker"`}},
		{"empty replica spec", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) { j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypePS] = nil },
			[]string{"spec.replicaSpecs.PS: Required value: replica spec must not be empty"}},
		{"negative replicas", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Replicas = ptrTo[int32](-1)
		},
			[]string{"spec.replicaSpecs.Worker.replicas: Invalid value: -1: must be >= 0"}},
		{"replicas over the bound", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Replicas = ptrTo[int32](2147483647)
		}, []string{"spec.replicaSpecs.Worker.replicas: Invalid value: 2147483647: must be at most 4096, the most replicas a job may run"}},
		{"replicas of every type add up over the bound", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypePS].Replicas = ptrTo[int32](2048)
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Replicas = ptrTo[int32](2049)
		}, []string{"spec.replicaSpecs: Invalid value: 4097: the replicas of every type add up to 4097; a job may run at most 4096"}},
		{"two chiefs", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeChief] = &v1alpha1.ReplicaSpec{Replicas: ptrTo[int32](2), RestartPolicy: "Never", Template: podWith(container("tensorflow"))}
		}, []string{"spec.replicaSpecs.Chief.replicas: Invalid value: 2: must be 0 or 1: a job has at most one Chief"}},
		{"chief and master", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) {
			for _, rt := range []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeChief, v1alpha1.ReplicaTypeMaster} {
				j.Spec.ReplicaSpecs[rt] = &v1alpha1.ReplicaSpec{Replicas: ptrTo[int32](1), RestartPolicy: "Never", Template: podWith(container("tensorflow"))}
			}
		}, []string{"spec.replicaSpecs: Forbidden: must not have both Chief and Master"}},
		{"tensorflow with only PS", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) { delete(j.Spec.ReplicaSpecs, v1alpha1.ReplicaTypeWorker) },
			[]string{"spec.replicaSpecs.Worker: Required value: tensorflow needs a Chief, Master or Worker to decide success"}},
		{"pytorch without master or workers", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs = map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypePS: j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]}
		}, []string{
			`spec.replicaSpecs.PS: Unsupported value: "PS": supported values: "Master", "Worker"`,
			"spec.replicaSpecs.Worker: Required value: pytorch needs a Master or Workers",
		}},
		{"pytorch of no master and 0 workers", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			delete(j.Spec.ReplicaSpecs, v1alpha1.ReplicaTypeMaster)
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Replicas = ptrTo[int32](0)
		}, []string{"spec.replicaSpecs.Worker.replicas: Invalid value: 0: must be >= 1: a pytorch job without a Master runs on its workers"}},
		{"pytorch master of 0", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) { j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeMaster].Replicas = ptrTo[int32](0) },
			[]string{"spec.replicaSpecs.Master.replicas: Invalid value: 0: must be 1: a pytorch Master runs rank 0; leave it out for a job of workers only"}},
		{"pytorch master of 2", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) { j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeMaster].Replicas = ptrTo[int32](2) },
			[]string{"spec.replicaSpecs.Master.replicas: Invalid value: 2: must be 1: a pytorch Master runs rank 0; leave it out for a job of workers only"}},
		{"elastic pytorch with two masters", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeMaster].Replicas = ptrTo[int32](2)
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{}
		}, []string{"spec.replicaSpecs.Master.replicas: Invalid value: 2: must be 1: a pytorch Master runs rank 0; leave it out for a job of workers only"}},
		{"xgboost master of -1", v1alpha1.FrameworkXGBoost, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeMaster].Replicas = ptrTo[int32](-1)
		},
			[]string{"spec.replicaSpecs.Master.replicas: Invalid value: -1: must be 1: xgboost needs a Master"}},
		{"elastic pytorch without workers", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			delete(j.Spec.ReplicaSpecs, v1alpha1.ReplicaTypeWorker)
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{}
		}, []string{"spec.replicaSpecs.Worker: Required value: must be configured if elastic policy is used"}},
		{"mpi without launcher", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) { delete(j.Spec.ReplicaSpecs, v1alpha1.ReplicaTypeLauncher) },
			[]string{"spec.replicaSpecs.Launcher: Required value: mpi needs a Launcher"}},
		{"mpi with two launchers", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeLauncher].Replicas = ptrTo[int32](2)
		},
			[]string{"spec.replicaSpecs.Launcher.replicas: Invalid value: 2: must be 1: mpi needs a Launcher"}},
		{"jax without workers", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs = map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{v1alpha1.ReplicaTypeMaster: j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]}
		}, []string{
			`spec.replicaSpecs.Master: Unsupported value: "Master": supported values: "Worker"`,
			"spec.replicaSpecs.Worker: Required value: jax needs Worker replicas",
		}},
		{"xgboost without master", v1alpha1.FrameworkXGBoost, func(j *v1alpha1.TrainJob) { delete(j.Spec.ReplicaSpecs, v1alpha1.ReplicaTypeMaster) },
			[]string{"spec.replicaSpecs.Master: Required value: xgboost needs a Master"}},
		// replica spec fields
		{"bad restart policy", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].RestartPolicy = "Sometimes"
		},
			[]string{`spec.replicaSpecs.Worker.restartPolicy: Unsupported value: "Sometimes": supported values: "Never", "OnFailure", "Always", "ExitCode"`}},
		{"retryable codes without ExitCode", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].RetryableExitCodes = []int32{75}
		},
			[]string{"spec.replicaSpecs.Worker.retryableExitCodes: Forbidden: only allowed with restartPolicy ExitCode"}},
		{"retryable code out of range", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			w := j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]
			w.RestartPolicy = v1alpha1.RestartPolicyExitCode
			w.RetryableExitCodes = []int32{75, 0, 256}
		}, []string{
			"spec.replicaSpecs.Worker.retryableExitCodes[1]: Invalid value: 0: must be between 1 and 255",
			"spec.replicaSpecs.Worker.retryableExitCodes[2]: Invalid value: 256: must be between 1 and 255",
		}},
		{"no containers", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Template.Spec.Containers = nil
		},
			[]string{"spec.replicaSpecs.Worker.template.spec.containers: Required value: at least one container"}},
		{"missing images", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			pod := &j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Template.Spec
			pod.Containers = append(pod.Containers, corev1.Container{Name: "sidecar"})
			pod.InitContainers = []corev1.Container{{Name: "fetch"}}
			pod.Containers[0].Image = ""
		}, []string{
			"spec.replicaSpecs.Worker.template.spec.initContainers[0].image: Required value: missing image",
			"spec.replicaSpecs.Worker.template.spec.containers[0].image: Required value: missing image",
			"spec.replicaSpecs.Worker.template.spec.containers[1].image: Required value: missing image",
		}},
		{"unnamed container", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			pod := &j.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Template.Spec
			pod.Containers = append(pod.Containers, corev1.Container{Image: "x"})
		}, []string{"spec.replicaSpecs.Worker.template.spec.containers[1].name: Required value: every container needs a name"}},
		// runPolicy
		{"negative backoffLimit", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.BackoffLimit = ptrTo[int32](-1) },
			[]string{"spec.runPolicy.backoffLimit: Invalid value: -1: must be >= 0"}},
		{"zero activeDeadlineSeconds", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.ActiveDeadlineSeconds = ptrTo[int64](0) },
			[]string{"spec.runPolicy.activeDeadlineSeconds: Invalid value: 0: must be > 0"}},
		{"negative ttl", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.TTLSecondsAfterFinished = ptrTo[int32](-5) },
			[]string{"spec.runPolicy.ttlSecondsAfterFinished: Invalid value: -5: must be >= 0"}},
		{"bad cleanPodPolicy", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.CleanPodPolicy = ptrTo[v1alpha1.CleanPodPolicy]("Some") },
			[]string{`spec.runPolicy.cleanPodPolicy: Unsupported value: "Some": supported values: "None", "Running", "All"`}},
		{"suspended", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.Suspend = ptrTo(true) },
			[]string{"spec.runPolicy.suspend: Forbidden: a suspended job cannot run; remove suspend or set it to false"}},
		{"bad gang", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.SchedulingPolicy.Gang = "yunikorn" },
			[]string{`spec.runPolicy.schedulingPolicy.gang: Unsupported value: "yunikorn": supported values: "none", "builtin", "kubernetes", "scheduler-plugins", "volcano", "kueue"`}},
		{"minAvailable above total", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.SchedulingPolicy.MinAvailable = ptrTo[int32](3) },
			[]string{"spec.runPolicy.schedulingPolicy.minAvailable: Invalid value: 3: must be between 1 and 2 (the job's total replicas)"}},
		{"minAvailable zero", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.SchedulingPolicy.MinAvailable = ptrTo[int32](0) },
			[]string{"spec.runPolicy.schedulingPolicy.minAvailable: Invalid value: 0: must be between 1 and 2 (the job's total replicas)"}},
		{"zero scheduleTimeoutSeconds", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.SchedulingPolicy.ScheduleTimeoutSeconds = ptrTo[int32](0) },
			[]string{"spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds: Invalid value: 0: must be > 0"}},
		{"zero maxScheduleAttempts", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.SchedulingPolicy.MaxScheduleAttempts = ptrTo[int32](0) },
			[]string{"spec.runPolicy.schedulingPolicy.maxScheduleAttempts: Invalid value: 0: must be >= 1"}},
		{"kueue without queue", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangKueue },
			[]string{"spec.runPolicy.schedulingPolicy.queue: Required value: gang kueue needs the Kueue LocalQueue name"}},
		// success policy and metrics
		{"bad successPolicy", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) { j.Spec.SuccessPolicy = "Majority" },
			[]string{`spec.successPolicy: Unsupported value: "Majority": supported values: "Default", "AllWorkers"`}},
		{"AllWorkers outside tensorflow", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) { j.Spec.SuccessPolicy = v1alpha1.SuccessPolicyAllWorkers },
			[]string{"spec.successPolicy: Forbidden: AllWorkers is only supported for framework tensorflow"}},
		{"metricsFrom malformed", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.MetricsFrom = "Worker" },
			[]string{`spec.metricsFrom: Invalid value: "Worker": must be <Type>/<index>, e.g. Worker/0`}},
		{"metricsFrom missing type", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.MetricsFrom = "Chief/0" },
			[]string{`spec.metricsFrom: Invalid value: "Chief/0": the job has no Chief replicas`}},
		{"metricsFrom index out of range", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.MetricsFrom = "Worker/2" },
			[]string{`spec.metricsFrom: Invalid value: "Worker/2": index out of range: Worker has 2 replicas`}},
		// pytorch fields
		{"bad nprocPerNode", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) { j.Spec.NprocPerNode = ptrTo("many") },
			[]string{`spec.nprocPerNode: Invalid value: "many": must be a positive number, auto, cpu or gpu`}},
		{"nprocPerNode outside pytorch", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.NprocPerNode = ptrTo("2") },
			[]string{"spec.nprocPerNode: Forbidden: only for framework pytorch"}},
		{"elasticPolicy outside pytorch", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) { j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{} },
			[]string{"spec.elasticPolicy: Forbidden: only for framework pytorch"}},
		{"elastic min above max", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptrTo[int32](3), MaxReplicas: ptrTo[int32](2)}
		}, []string{
			"spec.replicaSpecs.Worker.replicas: Invalid value: 2: must be within elasticPolicy's [minReplicas, maxReplicas] = [3, 2]",
			"spec.elasticPolicy.maxReplicas: Invalid value: 2: must be >= minReplicas (3)",
		}},
		{"workers outside elastic bounds", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptrTo[int32](3), MaxReplicas: ptrTo[int32](5)}
		}, []string{"spec.replicaSpecs.Worker.replicas: Invalid value: 2: must be within elasticPolicy's [minReplicas, maxReplicas] = [3, 5]"}},
		{"elastic minReplicas zero", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptrTo[int32](0), MaxReplicas: ptrTo[int32](2)}
		}, []string{"spec.elasticPolicy.minReplicas: Invalid value: 0: must be >= 1"}},
		{"bad rdzvBackend", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{RDZVBackend: ptrTo[v1alpha1.RDZVBackend]("zookeeper")}
		}, []string{`spec.elasticPolicy.rdzvBackend: Unsupported value: "zookeeper": supported values: "c10d", "etcd", "etcd-v2"`}},
		{"bad rdzvPort", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{RDZVPort: ptrTo[int32](70000)}
		},
			[]string{"spec.elasticPolicy.rdzvPort: Invalid value: 70000: must be between 1 and 65535"}},
		{"negative maxRestarts", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MaxRestarts: ptrTo[int32](-1)}
		},
			[]string{"spec.elasticPolicy.maxRestarts: Invalid value: -1: must be >= 0"}},
		{"elastic metrics trainstep cannot evaluate", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.PodsMetricSourceType},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "nvidia.com/gpu",
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType}}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType}}},
			}}
		}, []string{
			`spec.elasticPolicy.metrics[0].type: Unsupported value: "Pods": supported values: "Resource"`,
			`spec.elasticPolicy.metrics[1].resource.name: Unsupported value: "nvidia.com/gpu": supported values: "cpu", "memory"`,
			`spec.elasticPolicy.metrics[1].resource.target.type: Unsupported value: "Value": supported values: "Utilization", "AverageValue"`,
			"spec.elasticPolicy.metrics[2].resource.target.averageUtilization: Required value: a Utilization target needs a percentage >= 1",
		}},
		// training-operator v1.9 pytorchjob_webhook.go: both nproc fields set.
		{"nProcPerNode with nprocPerNode", v1alpha1.FrameworkPyTorch, func(j *v1alpha1.TrainJob) {
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{NProcPerNode: ptrTo[int32](2)}
		}, []string{"spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"}},
		// mpi fields
		{"mpi fields outside mpi", v1alpha1.FrameworkTensorFlow, func(j *v1alpha1.TrainJob) {
			j.Spec.SlotsPerWorker = ptrTo[int32](2)
			j.Spec.MPIImplementation = v1alpha1.MPIImplementationIntel
			j.Spec.SSHAuthMountPath = "/home/mpiuser/.ssh"
			j.Spec.RunLauncherAsWorker = ptrTo(true)
			j.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationWaitForWorkersReady
		}, []string{
			"spec.launcherCreationPolicy: Forbidden: only for framework mpi",
			"spec.mpiImplementation: Forbidden: only for framework mpi",
			"spec.runLauncherAsWorker: Forbidden: only for framework mpi",
			"spec.slotsPerWorker: Forbidden: only for framework mpi",
			"spec.sshAuthMountPath: Forbidden: only for framework mpi",
		}},
		{"zero slots", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) { j.Spec.SlotsPerWorker = ptrTo[int32](0) },
			[]string{"spec.slotsPerWorker: Invalid value: 0: must be >= 1"}},
		{"bad mpiImplementation", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) { j.Spec.MPIImplementation = "MVAPICH" },
			[]string{`spec.mpiImplementation: Unsupported value: "MVAPICH": supported values: "OpenMPI", "Intel", "MPICH"`}},
		{"bad launcherCreationPolicy", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) { j.Spec.LauncherCreationPolicy = "WhenReady" },
			[]string{`spec.launcherCreationPolicy: Unsupported value: "WhenReady": supported values: "AtStartup", "WaitForWorkersReady"`}},
		{"WaitForWorkersReady with the builtin gang", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) {
			j.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationWaitForWorkersReady
			j.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangBuiltin
		}, []string{"spec.launcherCreationPolicy: Forbidden: WaitForWorkersReady cannot be used with spec.runPolicy.schedulingPolicy.gang: builtin: " +
			"the gang waits for the launcher's pod, which waits for the workers to be Ready"}},
		{"WaitForWorkersReady with kueue", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) {
			j.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationWaitForWorkersReady
			j.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangKueue
			j.Spec.RunPolicy.SchedulingPolicy.Queue = "team"
		}, []string{"spec.launcherCreationPolicy: Forbidden: WaitForWorkersReady cannot be used with spec.runPolicy.schedulingPolicy.gang: kueue: " +
			"the gang waits for the launcher's pod, which waits for the workers to be Ready"}},
		{"WaitForWorkersReady with a PodGroup of every replica", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) {
			j.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationWaitForWorkersReady
			j.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangVolcano
		}, []string{"spec.launcherCreationPolicy: Forbidden: WaitForWorkersReady with spec.runPolicy.schedulingPolicy.gang: volcano " +
			"needs spec.runPolicy.schedulingPolicy.minAvailable set to at most the worker replicas (2): the launcher joins the PodGroup only once the workers are Ready"}},
		{"WaitForWorkersReady with minAvailable above the workers", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) {
			j.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationWaitForWorkersReady
			j.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangSchedulerPlugins
			j.Spec.RunPolicy.SchedulingPolicy.MinAvailable = ptrTo[int32](3)
		}, []string{"spec.launcherCreationPolicy: Forbidden: WaitForWorkersReady with spec.runPolicy.schedulingPolicy.gang: scheduler-plugins " +
			"needs spec.runPolicy.schedulingPolicy.minAvailable set to at most the worker replicas (2): the launcher joins the PodGroup only once the workers are Ready"}},
		{"WaitForWorkersReady with a Kubernetes PodGroup of every replica", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) {
			j.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationWaitForWorkersReady
			j.Spec.RunPolicy.SchedulingPolicy.Gang = v1alpha1.GangKubernetes
		}, []string{"spec.launcherCreationPolicy: Forbidden: WaitForWorkersReady with spec.runPolicy.schedulingPolicy.gang: kubernetes " +
			"needs spec.runPolicy.schedulingPolicy.minAvailable set to at most the worker replicas (2): the launcher joins the PodGroup only once the workers are Ready"}},
		{"relative sshAuthMountPath", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) { j.Spec.SSHAuthMountPath = ".ssh" },
			[]string{`spec.sshAuthMountPath: Invalid value: ".ssh": must be an absolute path`}},
		// failurePolicy
		{"failure policy: unknown restart and action", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			j.Spec.RunPolicy.FailurePolicy = &v1alpha1.FailurePolicy{Restart: "Pod", Rules: []v1alpha1.FailurePolicyRule{
				{Action: "Retry", OnExitCodes: &v1alpha1.ExitCodesRequirement{Operator: v1alpha1.ExitCodesOpIn, Values: []int32{42}}}}}
		}, []string{`spec.runPolicy.failurePolicy.restart: Unsupported value: "Pod": supported values: "Job", "Replica"`,
			`spec.runPolicy.failurePolicy.rules[0].action: Unsupported value: "Retry": supported values: "Ignore", "RestartJob", "RestartReplica", "FailJob"`}},
		{"failure policy: exit code 0 and out of range", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			j.Spec.RunPolicy.FailurePolicy.Rules = []v1alpha1.FailurePolicyRule{
				{Action: v1alpha1.FailureActionFailJob, OnExitCodes: &v1alpha1.ExitCodesRequirement{Operator: "Is", Values: []int32{0, 300}}}}
		}, []string{`spec.runPolicy.failurePolicy.rules[0].onExitCodes.operator: Unsupported value: "Is": supported values: "In", "NotIn"`,
			`spec.runPolicy.failurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: 0 is success, not a failure`,
			`spec.runPolicy.failurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 300: must be 1-255`}},
		{"failure policy: unknown replica type, nothing to match", v1alpha1.FrameworkJAX, func(j *v1alpha1.TrainJob) {
			j.Spec.RunPolicy.FailurePolicy.Rules = []v1alpha1.FailurePolicyRule{{Action: v1alpha1.FailureActionIgnore, ReplicaTypes: []v1alpha1.ReplicaType{"Chief"}}}
		}, []string{`spec.runPolicy.failurePolicy.rules[0]: Required value: a rule needs onExitCodes or onPodConditions`,
			`spec.runPolicy.failurePolicy.rules[0].replicaTypes[0]: Unsupported value: "Chief": supported values: "Worker"`}},
		{"mpi name leaves room for -config", v1alpha1.FrameworkMPI, func(j *v1alpha1.TrainJob) {
			j.Name = strings.Repeat("c", 56) // "-worker-1" makes 65
		}, []string{`metadata.name: Invalid value: "` + strings.Repeat("c", 56) + `": too long: object name "` + strings.Repeat("c", 56) +
			`-launcher-0" would be 67 characters, the limit is 63; shorten the name to at most 52 characters`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := validJob(tc.framework)
			tc.mutate(job)
			var got []string
			for _, err := range Validate(job) {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// A replica count breaks one rule at a time, so its field gets one error:
// two on one path (say "must be 0 or 1" and "must be 1") contradict or
// repeat each other.
func TestValidateOneErrorPerReplicasField(t *testing.T) {
	counts := []int32{-1, 0, 1, 2, 3, MaxReplicas + 1}
	for _, f := range Names() {
		for _, elastic := range []bool{false, true} {
			if elastic && f != v1alpha1.FrameworkPyTorch {
				continue
			}
			for _, rt := range mustFor(f).Conventions().Types() {
				for _, n := range counts {
					job := validJob(f)
					if elastic {
						job.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptrTo[int32](1), MaxReplicas: ptrTo[int32](2)}
					}
					if job.Spec.ReplicaSpecs[rt] == nil {
						job.Spec.ReplicaSpecs[rt] = &v1alpha1.ReplicaSpec{RestartPolicy: v1alpha1.RestartPolicyNever, Template: podWith(container(mustFor(f).Conventions().Container))}
					}
					job.Spec.ReplicaSpecs[rt].Replicas = ptrTo(n)
					perPath := map[string][]string{}
					for _, err := range Validate(job) {
						if strings.HasSuffix(err.Field, ".replicas") {
							perPath[err.Field] = append(perPath[err.Field], err.Error())
						}
					}
					for path, errs := range perPath {
						if len(errs) > 1 {
							t.Errorf("%s (elastic %v) %s.replicas=%d: %d errors at %s:\n%s", f, elastic, rt, n, len(errs), path, strings.Join(errs, "\n"))
						}
					}
				}
			}
		}
	}
}

// The largest job the project runs, 2048 workers beside a chief and
// parameter servers, and a job of exactly MaxReplicas are valid.
func TestValidateAcceptsLargeJobs(t *testing.T) {
	for _, shape := range []map[v1alpha1.ReplicaType]int32{
		{v1alpha1.ReplicaTypeChief: 1, v1alpha1.ReplicaTypePS: 4, v1alpha1.ReplicaTypeWorker: 2048},
		{v1alpha1.ReplicaTypePS: 1, v1alpha1.ReplicaTypeWorker: MaxReplicas - 1},
	} {
		job := validJob(v1alpha1.FrameworkTensorFlow)
		for rt, n := range shape {
			job.Spec.ReplicaSpecs[rt] = &v1alpha1.ReplicaSpec{Replicas: ptrTo(n), RestartPolicy: v1alpha1.RestartPolicyNever, Template: podWith(container("tensorflow"))}
		}
		if errs := Validate(job); len(errs) != 0 {
			t.Errorf("job of %v rejected:\n%s", shape, errs.ToAggregate())
		}
	}
}

// A job that grows into capacity names a worker for every slot up to
// maxReplicas; one that keeps its Worker replicas (a PyTorchJob's default)
// names those only.
func TestValidateElasticNameUsesItsSlots(t *testing.T) {
	for _, grow := range []bool{true, false} {
		job := validJob(v1alpha1.FrameworkPyTorch)
		delete(job.Spec.ReplicaSpecs, v1alpha1.ReplicaTypeMaster)
		job.Name = strings.Repeat("d", 54) // worker-1 fits; worker-10 (max 11) does not
		job.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: ptrTo[int32](1), MaxReplicas: ptrTo[int32](11), GrowIntoCapacity: ptrTo(grow)}
		errs := Validate(job)
		if !grow {
			if len(errs) != 0 {
				t.Errorf("growIntoCapacity false: errors %v, want none (2 workers)", errs)
			}
			continue
		}
		if len(errs) != 1 || errs[0].Field != "metadata.name" || !strings.Contains(errs[0].Detail, "-worker-10") {
			t.Fatalf("errors = %v, want one metadata.name error naming worker-10", errs)
		}
	}
}

// A name over 63 characters gets the limit for this job, not the DNS
// label's 63: tensorflow's "-worker-0" leaves 54.
func TestValidateNameOver63GivesTheJobsLimit(t *testing.T) {
	job := validJob(v1alpha1.FrameworkTensorFlow)
	job.Name = strings.Repeat("a", 70)
	errs := Validate(job)
	if len(errs) != 1 {
		t.Fatalf("errors %v, want one", errs)
	}
	if msg := errs[0].Error(); !strings.HasSuffix(msg, "shorten the name to at most 54 characters") || strings.Contains(msg, "no more than 63") {
		t.Errorf("error %q, want the job's limit of 54", msg)
	}
}

func mustFor(f v1alpha1.Framework) framework.Framework {
	fw, err := For(f)
	if err != nil {
		panic(err)
	}
	return fw
}
