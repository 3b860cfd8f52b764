package v1alpha1

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxObjectNameLength is the longest name of any object a job creates: pod
// names double as hostnames and Service names, both DNS-1035 labels.
const MaxObjectNameLength = validation.DNS1035LabelMaxLength

// MaxReplicas is the most replicas a job may run, of every type together.
// 2048 workers, the largest job trainstep is meant to run on one step, are
// well inside. At 4096 a TensorFlow job with the template's job names can
// no longer start: its TF_CONFIG, which lists every replica, is 183 KB in
// namespace "default", over the 128 KiB Linux allows one environment
// variable (rendering checks that limit exactly, for the actual names).
// And 4096 pods and as many Services are beyond what Kubernetes'
// scalability thresholds test in one namespace (3000 pods).
const MaxReplicas = 4096

// Validate checks a defaulted job and returns every problem with its field
// path, in a stable order. Replica-type keys are written as
// spec.replicaSpecs.Worker (Kubeflow's field.Path .Key form would print
// spec.replicaSpecs[Worker], which no manifest author types).
func Validate(job *TrainJob) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateMetadata(job)...)
	spec := field.NewPath("spec")
	if !IsFramework(job.Spec.Framework) {
		errs = append(errs, field.NotSupported(spec.Child("framework"), job.Spec.Framework, Frameworks))
		return errs
	}
	errs = append(errs, validateReplicaSpecs(job, spec.Child("replicaSpecs"))...)
	errs = append(errs, validateRunPolicy(job, spec.Child("runPolicy"))...)
	errs = append(errs, validateSuccessAndMetrics(job, spec)...)
	errs = append(errs, validatePyTorchFields(job, spec)...)
	errs = append(errs, validateMPIFields(job, spec)...)
	errs = append(errs, validateServiceLayout(job, spec)...)
	return errs
}

func validateMetadata(job *TrainJob) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if job.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(job.Namespace) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), job.Namespace, msg))
		}
	}
	name := meta.Child("name")
	if job.Name == "" {
		return append(errs, field.Required(name, "the job needs a name (metadata.name or --name)"))
	}
	// The length that matters is that of the longest object name the job
	// makes (checked below, with the limit for this job), not the label's 63.
	tooLong := validation.MaxLenError(validation.DNS1035LabelMaxLength)
	var formatErrs field.ErrorList
	for _, msg := range validation.IsDNS1035Label(job.Name) {
		if msg != tooLong {
			formatErrs = append(formatErrs, field.Invalid(name, job.Name, msg))
		}
	}
	if len(formatErrs) > 0 {
		return append(errs, formatErrs...)
	}
	if longest := longestObjectName(job); len(longest) > MaxObjectNameLength {
		errs = append(errs, field.Invalid(name, job.Name, fmt.Sprintf(
			"too long: object name %q would be %d characters, the limit is %d; shorten the name to at most %d characters",
			longest, len(longest), MaxObjectNameLength, len(job.Name)-(len(longest)-MaxObjectNameLength))))
	}
	return errs
}

// longestObjectName is the longest name among the objects the job creates:
// every replica's pod and Service, and MPI's job-wide Service, hostfile
// ConfigMap and SSH Secret, the progress endpoint's <job>-status Service.
// Elastic workers count up to maxReplicas.
func longestObjectName(job *TrainJob) string {
	names := []string{job.Name, TrainerStatusName(job.Name)}
	if job.Spec.Framework == FrameworkMPI {
		names = append(names, MPIConfigMapName(job.Name), MPISSHSecretName(job.Name))
	}
	for rt, spec := range job.Spec.ReplicaSpecs {
		count := spec.ReplicaCount()
		if rt == ReplicaTypeWorker && IsElastic(job) && job.Spec.ElasticPolicy.MaxReplicas != nil &&
			*job.Spec.ElasticPolicy.MaxReplicas > count {
			count = *job.Spec.ElasticPolicy.MaxReplicas
		}
		if count < 1 {
			count = 1
		}
		names = append(names, ReplicaName(job.Name, rt, int(count-1)))
	}
	longest := ""
	for _, n := range names {
		if len(n) > len(longest) {
			longest = n
		}
	}
	return longest
}

// singletonTypes may run at most one replica.
var singletonTypes = map[ReplicaType]bool{ReplicaTypeChief: true, ReplicaTypeMaster: true, ReplicaTypeLauncher: true}

func validateReplicaSpecs(job *TrainJob, specsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	f := job.Spec.Framework
	if len(job.Spec.ReplicaSpecs) == 0 {
		return append(errs, field.Required(specsPath, fmt.Sprintf("%s needs at least one of %s", f, joinTypes(AllowedReplicaTypes(f)))))
	}
	allowed := AllowedReplicaTypes(f)
	for _, rt := range SortedReplicaTypes(job) {
		p := specsPath.Child(string(rt))
		if !containsType(allowed, rt) {
			errs = append(errs, field.NotSupported(p, rt, allowed))
			continue
		}
		spec := job.Spec.ReplicaSpecs[rt]
		if spec == nil {
			errs = append(errs, field.Required(p, "replica spec must not be empty"))
			continue
		}
		errs = append(errs, validateReplicaSpec(job, rt, spec, p)...)
	}
	errs = append(errs, validateRequiredTypes(job, specsPath)...)
	errs = append(errs, validateTotalReplicas(job, specsPath)...)
	return errs
}

// validateTotalReplicas bounds the sum of every type's replicas, counted
// without int32 overflow. A type over the bound on its own is reported at
// its replicas field instead.
func validateTotalReplicas(job *TrainJob, specsPath *field.Path) field.ErrorList {
	var total int64
	for _, spec := range job.Spec.ReplicaSpecs {
		n := spec.ReplicaCount()
		if n > MaxReplicas {
			return nil
		}
		total += int64(max(n, 0))
	}
	if total <= MaxReplicas {
		return nil
	}
	return field.ErrorList{field.Invalid(specsPath, total, fmt.Sprintf(
		"the replicas of every type add up to %d; a job may run at most %d", total, MaxReplicas))}
}

// requiredSingleton is the replica type the job's framework cannot run
// without, whose one replica decides success, and why; "" when none.
func requiredSingleton(job *TrainJob) (ReplicaType, string) {
	switch job.Spec.Framework {
	case FrameworkMPI:
		return ReplicaTypeLauncher, "mpi needs a Launcher"
	case FrameworkXGBoost:
		return ReplicaTypeMaster, "xgboost needs a Master"
	}
	return "", ""
}

// exactlyOne says why rt, when the job has it, must run exactly one
// replica; "" when it need not.
func exactlyOne(job *TrainJob, rt ReplicaType) string {
	if required, why := requiredSingleton(job); rt == required {
		return why
	}
	// Training Operator v1.9's webhook takes a PyTorchJob's Master only with
	// one replica, elastic or not; without a Master the workers run the job.
	if job.Spec.Framework == FrameworkPyTorch && rt == ReplicaTypeMaster {
		return "a pytorch Master runs rank 0; leave it out for a job of workers only"
	}
	return ""
}

// needsWorkers says a static pytorch job without a Master has only its
// workers to run (Training Operator v1.9: "must be at least 1").
func needsWorkers(job *TrainJob, rt ReplicaType) bool {
	_, master := job.Spec.ReplicaSpecs[ReplicaTypeMaster]
	return job.Spec.Framework == FrameworkPyTorch && rt == ReplicaTypeWorker && !master && job.Spec.ElasticPolicy == nil
}

// validateReplicaSpec checks one type's fields. Its replicas get at most one
// error: the first rule the count breaks.
func validateReplicaSpec(job *TrainJob, rt ReplicaType, spec *ReplicaSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	replicas := spec.ReplicaCount()
	one := exactlyOne(job, rt)
	switch {
	case one != "" && replicas != 1:
		errs = append(errs, field.Invalid(p.Child("replicas"), replicas, "must be 1: "+one))
	case needsWorkers(job, rt) && replicas == 0:
		errs = append(errs, field.Invalid(p.Child("replicas"), replicas, "must be >= 1: a pytorch job without a Master runs on its workers"))
	case replicas < 0:
		errs = append(errs, field.Invalid(p.Child("replicas"), replicas, "must be >= 0"))
	case replicas > MaxReplicas:
		errs = append(errs, field.Invalid(p.Child("replicas"), replicas, fmt.Sprintf("must be at most %d, the most replicas a job may run", MaxReplicas)))
	case singletonTypes[rt] && replicas > 1:
		errs = append(errs, field.Invalid(p.Child("replicas"), replicas, "must be 0 or 1: a job has at most one "+string(rt)))
	}
	switch spec.RestartPolicy {
	case RestartPolicyNever, RestartPolicyOnFailure, RestartPolicyAlways, RestartPolicyExitCode:
	default:
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), spec.RestartPolicy,
			[]RestartPolicy{RestartPolicyNever, RestartPolicyOnFailure, RestartPolicyAlways, RestartPolicyExitCode}))
	}
	codes := p.Child("retryableExitCodes")
	if len(spec.RetryableExitCodes) > 0 && spec.RestartPolicy != RestartPolicyExitCode {
		errs = append(errs, field.Forbidden(codes, "only allowed with restartPolicy ExitCode"))
	}
	for i, code := range spec.RetryableExitCodes {
		if code < 1 || code > 255 {
			errs = append(errs, field.Invalid(codes.Index(i), code, "must be between 1 and 255"))
		}
	}
	errs = append(errs, validateContainers(spec, p.Child("template", "spec"))...)
	return errs
}

func validateContainers(spec *ReplicaSpec, podPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	pod := &spec.Template.Spec
	if len(pod.Containers) == 0 {
		errs = append(errs, field.Required(podPath.Child("containers"), "at least one container"))
	}
	for i := range pod.InitContainers {
		c := &pod.InitContainers[i]
		errs = append(errs, validateContainer(c.Name, c.Image, podPath.Child("initContainers").Index(i))...)
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		errs = append(errs, validateContainer(c.Name, c.Image, podPath.Child("containers").Index(i))...)
	}
	return errs
}

func validateContainer(name, image string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), "every container needs a name"))
	}
	if strings.TrimSpace(image) == "" {
		errs = append(errs, field.Required(p.Child("image"), "missing image"))
	}
	return errs
}

// validateRequiredTypes checks the replica types each framework cannot run
// without. How many replicas a present type runs is validateReplicaSpec's.
func validateRequiredTypes(job *TrainJob, specsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	specs := job.Spec.ReplicaSpecs
	if rt, why := requiredSingleton(job); rt != "" {
		if _, ok := specs[rt]; !ok {
			errs = append(errs, field.Required(specsPath.Child(string(rt)), why))
		}
	}
	switch job.Spec.Framework {
	case FrameworkTensorFlow:
		_, chief := specs[ReplicaTypeChief]
		_, master := specs[ReplicaTypeMaster]
		_, worker := specs[ReplicaTypeWorker]
		if chief && master {
			errs = append(errs, field.Forbidden(specsPath, "must not have both Chief and Master"))
		}
		if !chief && !master && !worker {
			errs = append(errs, field.Required(specsPath.Child(string(ReplicaTypeWorker)),
				"tensorflow needs a Chief, Master or Worker to decide success"))
		}
	case FrameworkPyTorch:
		_, master := specs[ReplicaTypeMaster]
		_, worker := specs[ReplicaTypeWorker]
		switch {
		case !worker && job.Spec.ElasticPolicy != nil:
			errs = append(errs, field.Required(specsPath.Child(string(ReplicaTypeWorker)), "must be configured if elastic policy is used"))
		case !worker && !master:
			errs = append(errs, field.Required(specsPath.Child(string(ReplicaTypeWorker)), "pytorch needs a Master or Workers"))
		}
	case FrameworkJAX:
		if _, ok := specs[ReplicaTypeWorker]; !ok {
			errs = append(errs, field.Required(specsPath.Child(string(ReplicaTypeWorker)), "jax needs Worker replicas"))
		}
	}
	return errs
}

var (
	cleanPodPolicies = []CleanPodPolicy{CleanPodPolicyNone, CleanPodPolicyRunning, CleanPodPolicyAll}
	gangKinds        = []GangKind{GangNone, GangBuiltin, GangKubernetes, GangSchedulerPlugins, GangVolcano, GangKueue}
)

func validateRunPolicy(job *TrainJob, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	rp := &job.Spec.RunPolicy
	if rp.BackoffLimit != nil && *rp.BackoffLimit < 0 {
		errs = append(errs, field.Invalid(p.Child("backoffLimit"), *rp.BackoffLimit, "must be >= 0"))
	}
	if rp.ActiveDeadlineSeconds != nil && *rp.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *rp.ActiveDeadlineSeconds, "must be > 0"))
	}
	if rp.TTLSecondsAfterFinished != nil && *rp.TTLSecondsAfterFinished < 0 {
		errs = append(errs, field.Invalid(p.Child("ttlSecondsAfterFinished"), *rp.TTLSecondsAfterFinished, "must be >= 0"))
	}
	if rp.CleanPodPolicy != nil && !containsValue(cleanPodPolicies, *rp.CleanPodPolicy) {
		errs = append(errs, field.NotSupported(p.Child("cleanPodPolicy"), *rp.CleanPodPolicy, cleanPodPolicies))
	}
	if rp.Suspend != nil && *rp.Suspend {
		errs = append(errs, field.Forbidden(p.Child("suspend"), "a suspended job cannot run; remove suspend or set it to false"))
	}
	if rp.SchedulingPolicy != nil {
		errs = append(errs, validateSchedulingPolicy(rp.SchedulingPolicy, TotalReplicas(job), p.Child("schedulingPolicy"))...)
	}
	if rp.FailurePolicy != nil {
		errs = append(errs, validateFailurePolicy(job, rp.FailurePolicy, p.Child("failurePolicy"))...)
	}
	return errs
}

var (
	failureRestarts   = []FailureRestart{FailureRestartJob, FailureRestartReplica}
	failureActions    = []FailureAction{FailureActionIgnore, FailureActionRestartJob, FailureActionRestartReplica, FailureActionFailJob}
	exitCodeOps       = []ExitCodesOperator{ExitCodesOpIn, ExitCodesOpNotIn}
	conditionStatuses = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}
)

func validateFailurePolicy(job *TrainJob, fp *FailurePolicy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if fp.Restart != "" && !containsValue(failureRestarts, fp.Restart) {
		errs = append(errs, field.NotSupported(p.Child("restart"), fp.Restart, failureRestarts))
	}
	for i, rule := range fp.Rules {
		rp := p.Child("rules").Index(i)
		if !containsValue(failureActions, rule.Action) {
			errs = append(errs, field.NotSupported(rp.Child("action"), rule.Action, failureActions))
		}
		if rule.OnExitCodes == nil && len(rule.OnPodConditions) == 0 {
			errs = append(errs, field.Required(rp, "a rule needs onExitCodes or onPodConditions"))
		}
		if rule.OnExitCodes != nil && len(rule.OnPodConditions) > 0 {
			errs = append(errs, field.Invalid(rp, "onExitCodes and onPodConditions", "a rule matches on one of them, not both (as a Job's podFailurePolicy)"))
		}
		if ec := rule.OnExitCodes; ec != nil {
			ep := rp.Child("onExitCodes")
			if !containsValue(exitCodeOps, ec.Operator) {
				errs = append(errs, field.NotSupported(ep.Child("operator"), ec.Operator, exitCodeOps))
			}
			if len(ec.Values) == 0 {
				errs = append(errs, field.Required(ep.Child("values"), "at least one exit code"))
			}
			for j, v := range ec.Values {
				switch {
				case v == 0:
					errs = append(errs, field.Invalid(ep.Child("values").Index(j), v, "0 is success, not a failure"))
				case v < 0 || v > 255:
					errs = append(errs, field.Invalid(ep.Child("values").Index(j), v, "must be 1-255"))
				}
			}
		}
		for j, c := range rule.OnPodConditions {
			cp := rp.Child("onPodConditions").Index(j)
			if c.Type == "" {
				errs = append(errs, field.Required(cp.Child("type"), "a pod condition type, e.g. DisruptionTarget"))
			}
			if c.Status != "" && !containsValue(conditionStatuses, c.Status) {
				errs = append(errs, field.NotSupported(cp.Child("status"), c.Status, conditionStatuses))
			}
		}
		for j, rt := range rule.ReplicaTypes {
			if _, ok := job.Spec.ReplicaSpecs[rt]; !ok {
				errs = append(errs, field.NotSupported(rp.Child("replicaTypes").Index(j), rt, SortedReplicaTypes(job)))
			}
		}
	}
	return errs
}

func validateSchedulingPolicy(sp *SchedulingPolicy, total int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !containsValue(gangKinds, sp.Gang) {
		errs = append(errs, field.NotSupported(p.Child("gang"), sp.Gang, gangKinds))
	}
	if sp.MinAvailable != nil && (*sp.MinAvailable < 1 || *sp.MinAvailable > total) {
		errs = append(errs, field.Invalid(p.Child("minAvailable"), *sp.MinAvailable,
			fmt.Sprintf("must be between 1 and %d (the job's total replicas)", total)))
	}
	if sp.ScheduleTimeoutSeconds != nil && *sp.ScheduleTimeoutSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("scheduleTimeoutSeconds"), *sp.ScheduleTimeoutSeconds, "must be > 0"))
	}
	if sp.MaxScheduleAttempts != nil && *sp.MaxScheduleAttempts < 1 {
		errs = append(errs, field.Invalid(p.Child("maxScheduleAttempts"), *sp.MaxScheduleAttempts, "must be >= 1"))
	}
	if sp.Gang == GangKueue && sp.Queue == "" {
		errs = append(errs, field.Required(p.Child("queue"), "gang kueue needs the Kueue LocalQueue name"))
	}
	return errs
}

func validateSuccessAndMetrics(job *TrainJob, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch job.Spec.SuccessPolicy {
	case SuccessPolicyDefault:
	case SuccessPolicyAllWorkers:
		if job.Spec.Framework != FrameworkTensorFlow {
			errs = append(errs, field.Forbidden(spec.Child("successPolicy"), "AllWorkers is only supported for framework tensorflow"))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("successPolicy"), job.Spec.SuccessPolicy,
			[]SuccessPolicy{SuccessPolicyDefault, SuccessPolicyAllWorkers}))
	}
	if job.Spec.MetricsFrom == "" {
		return errs
	}
	p := spec.Child("metricsFrom")
	rt, index, err := ParseMetricsFrom(job.Spec.MetricsFrom)
	if err != nil {
		return append(errs, field.Invalid(p, job.Spec.MetricsFrom, err.Error()))
	}
	replicaSpec, ok := job.Spec.ReplicaSpecs[rt]
	switch {
	case !ok:
		errs = append(errs, field.Invalid(p, job.Spec.MetricsFrom, fmt.Sprintf("the job has no %s replicas", rt)))
	case int32(index) >= replicaSpec.ReplicaCount():
		errs = append(errs, field.Invalid(p, job.Spec.MetricsFrom,
			fmt.Sprintf("index out of range: %s has %d replicas", rt, replicaSpec.ReplicaCount())))
	}
	return errs
}

var rdzvBackends = []RDZVBackend{BackendC10D, BackendETCD, BackendETCDv2}

func validatePyTorchFields(job *TrainJob, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	s := &job.Spec
	if s.Framework != FrameworkPyTorch {
		if s.NprocPerNode != nil {
			errs = append(errs, field.Forbidden(spec.Child("nprocPerNode"), "only for framework pytorch"))
		}
		if s.ElasticPolicy != nil {
			errs = append(errs, field.Forbidden(spec.Child("elasticPolicy"), "only for framework pytorch"))
		}
		return errs
	}
	if s.NprocPerNode != nil && !validNprocPerNode(*s.NprocPerNode) {
		errs = append(errs, field.Invalid(spec.Child("nprocPerNode"), *s.NprocPerNode, "must be a positive number, auto, cpu or gpu"))
	}
	if s.ElasticPolicy != nil {
		errs = append(errs, validateElasticPolicy(job, spec.Child("elasticPolicy"))...)
	}
	return errs
}

func validNprocPerNode(v string) bool {
	switch v {
	case "auto", "cpu", "gpu":
		return true
	}
	n, err := strconv.Atoi(v)
	return err == nil && n > 0
}

func validateElasticPolicy(job *TrainJob, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ep := job.Spec.ElasticPolicy
	if ep.MinReplicas != nil && *ep.MinReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), *ep.MinReplicas, "must be >= 1"))
	}
	if ep.MinReplicas != nil && ep.MaxReplicas != nil && *ep.MinReplicas > *ep.MaxReplicas {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), *ep.MaxReplicas,
			fmt.Sprintf("must be >= minReplicas (%d)", *ep.MinReplicas)))
	}
	// A count below 0 or over MaxReplicas already has its error.
	if worker := job.Spec.ReplicaSpecs[ReplicaTypeWorker]; worker != nil && worker.ReplicaCount() >= 0 && worker.ReplicaCount() <= MaxReplicas {
		n := worker.ReplicaCount()
		if (ep.MinReplicas != nil && n < *ep.MinReplicas) || (ep.MaxReplicas != nil && n > *ep.MaxReplicas) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "replicaSpecs", string(ReplicaTypeWorker), "replicas"), n,
				fmt.Sprintf("must be within elasticPolicy's [minReplicas, maxReplicas] = [%s, %s]", int32String(ep.MinReplicas), int32String(ep.MaxReplicas))))
		}
	}
	if ep.RDZVBackend != nil && !containsValue(rdzvBackends, *ep.RDZVBackend) {
		errs = append(errs, field.NotSupported(p.Child("rdzvBackend"), *ep.RDZVBackend, rdzvBackends))
	}
	if ep.RDZVPort != nil && (*ep.RDZVPort < 1 || *ep.RDZVPort > 65535) {
		errs = append(errs, field.Invalid(p.Child("rdzvPort"), *ep.RDZVPort, "must be between 1 and 65535"))
	}
	if ep.MaxRestarts != nil && *ep.MaxRestarts < 0 {
		errs = append(errs, field.Invalid(p.Child("maxRestarts"), *ep.MaxRestarts, "must be >= 0"))
	}
	for i, m := range ep.Metrics {
		errs = append(errs, validateElasticMetric(m, p.Child("metrics").Index(i))...)
	}
	if ep.NProcPerNode != nil {
		if job.Spec.NprocPerNode != nil {
			// training-operator v1.9 pytorchjob_webhook.go rejects the pair.
			errs = append(errs, field.Forbidden(p.Child("nProcPerNode"), "must not be used with spec.nprocPerNode"))
		} else if *ep.NProcPerNode < 1 {
			errs = append(errs, field.Invalid(p.Child("nProcPerNode"), *ep.NProcPerNode, "must be >= 1"))
		}
	}
	return errs
}

// validateElasticMetric accepts what trainstep evaluates: Resource metrics
// (cpu, memory) with a Utilization or AverageValue target.
func validateElasticMetric(m autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	if m.Type != autoscalingv2.ResourceMetricSourceType {
		return field.ErrorList{field.NotSupported(p.Child("type"), m.Type, []autoscalingv2.MetricSourceType{autoscalingv2.ResourceMetricSourceType})}
	}
	if m.Resource == nil {
		return field.ErrorList{field.Required(p.Child("resource"), "a Resource metric names its resource and target")}
	}
	var errs field.ErrorList
	r, t := m.Resource, m.Resource.Target
	if r.Name != corev1.ResourceCPU && r.Name != corev1.ResourceMemory {
		errs = append(errs, field.NotSupported(p.Child("resource", "name"), string(r.Name), []string{string(corev1.ResourceCPU), string(corev1.ResourceMemory)}))
	}
	tp := p.Child("resource", "target")
	switch t.Type {
	case autoscalingv2.UtilizationMetricType:
		if t.AverageUtilization == nil || *t.AverageUtilization < 1 {
			errs = append(errs, field.Required(tp.Child("averageUtilization"), "a Utilization target needs a percentage >= 1"))
		}
	case autoscalingv2.AverageValueMetricType:
		if t.AverageValue == nil || t.AverageValue.Sign() <= 0 {
			errs = append(errs, field.Required(tp.Child("averageValue"), "an AverageValue target needs a quantity > 0"))
		}
	default:
		errs = append(errs, field.NotSupported(tp.Child("type"), t.Type, []autoscalingv2.MetricTargetType{autoscalingv2.UtilizationMetricType, autoscalingv2.AverageValueMetricType}))
	}
	return errs
}

var mpiImplementations = []MPIImplementation{MPIImplementationOpenMPI, MPIImplementationIntel, MPIImplementationMPICH}

func validateMPIFields(job *TrainJob, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	s := &job.Spec
	if s.Framework != FrameworkMPI {
		mpiOnly := []struct {
			name string
			set  bool
		}{
			{"launcherCreationPolicy", s.LauncherCreationPolicy != ""},
			{"mpiImplementation", s.MPIImplementation != ""},
			{"runLauncherAsWorker", s.RunLauncherAsWorker != nil},
			{"slotsPerWorker", s.SlotsPerWorker != nil},
			{"sshAuthMountPath", s.SSHAuthMountPath != ""},
		}
		for _, f := range mpiOnly {
			if f.set {
				errs = append(errs, field.Forbidden(spec.Child(f.name), "only for framework mpi"))
			}
		}
		return errs
	}
	if s.SlotsPerWorker != nil && *s.SlotsPerWorker < 1 {
		errs = append(errs, field.Invalid(spec.Child("slotsPerWorker"), *s.SlotsPerWorker, "must be >= 1"))
	}
	if !containsValue(mpiImplementations, s.MPIImplementation) {
		errs = append(errs, field.NotSupported(spec.Child("mpiImplementation"), s.MPIImplementation, mpiImplementations))
	}
	if !path.IsAbs(s.SSHAuthMountPath) {
		errs = append(errs, field.Invalid(spec.Child("sshAuthMountPath"), s.SSHAuthMountPath, "must be an absolute path"))
	}
	return append(errs, validateLauncherCreation(job, spec)...)
}

var launcherCreationPolicies = []LauncherCreationPolicy{LauncherCreationAtStartup, LauncherCreationWaitForWorkersReady}

// validateLauncherCreation checks launcherCreationPolicy and the gangs it can
// run with. A launcher held back until the workers are Ready must not be a
// member the gang waits for: the builtin and Kueue gangs wait for every
// replica's pod to exist, and a PodGroup needs minAvailable within the
// workers (mpi-operator creates its PodGroup with minMember workers+1 and
// deadlocks, kubeflow/mpi-operator#608).
func validateLauncherCreation(job *TrainJob, spec *field.Path) field.ErrorList {
	s := &job.Spec
	p := spec.Child("launcherCreationPolicy")
	if !containsValue(launcherCreationPolicies, s.LauncherCreationPolicy) {
		return field.ErrorList{field.NotSupported(p, s.LauncherCreationPolicy, launcherCreationPolicies)}
	}
	sp := s.RunPolicy.SchedulingPolicy
	if s.LauncherCreationPolicy != LauncherCreationWaitForWorkersReady || sp == nil {
		return nil
	}
	gangPath := spec.Child("runPolicy", "schedulingPolicy")
	switch sp.Gang {
	case GangBuiltin, GangKueue:
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
			"WaitForWorkersReady cannot be used with %s: %s: the gang waits for the launcher's pod, which waits for the workers to be Ready",
			gangPath.Child("gang"), sp.Gang))}
	case GangKubernetes, GangSchedulerPlugins, GangVolcano:
		workers := s.ReplicaSpecs[ReplicaTypeWorker].ReplicaCount()
		if sp.MinAvailable == nil || *sp.MinAvailable > workers {
			return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
				"WaitForWorkersReady with %s: %s needs %s set to at most the worker replicas (%d): the launcher joins the PodGroup only once the workers are Ready",
				gangPath.Child("gang"), sp.Gang, gangPath.Child("minAvailable"), workers))}
		}
	}
	return nil
}

func containsType(types []ReplicaType, rt ReplicaType) bool { return containsValue(types, rt) }

func containsValue[T comparable](values []T, v T) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

func joinTypes(types []ReplicaType) string {
	s := make([]string, len(types))
	for i, t := range types {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

func int32String(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}
