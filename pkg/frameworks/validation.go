package frameworks

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// MaxObjectNameLength is the longest name of any object a job creates: pod
// names double as hostnames and Service names, both DNS-1035 labels.
const MaxObjectNameLength = validation.DNS1035LabelMaxLength

// MaxReplicas is the most replicas a job may run, of every type together
// (framework.MaxReplicas says why).
const MaxReplicas = framework.MaxReplicas

// Validate checks a defaulted job and returns every problem with its field
// path, in a stable order: the job-wide rules here, and its framework's.
// Replica-type keys are written as spec.replicaSpecs.Worker (Kubeflow's
// field.Path .Key form would print spec.replicaSpecs[Worker], which no
// manifest author types).
func Validate(job *v1alpha1.TrainJob) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateMetadata(job)...)
	spec := field.NewPath("spec")
	f, err := For(job.Spec.Framework)
	if err != nil {
		return append(errs, field.NotSupported(spec.Child("framework"), job.Spec.Framework, Names()))
	}
	own := splitFrameworkErrors(f.Validate(job))
	errs = append(errs, validateReplicaSpecs(job, f, own)...)
	errs = append(errs, validateRunPolicy(job, spec.Child("runPolicy"))...)
	errs = append(errs, validateSuccessAndMetrics(job, spec)...)
	errs = append(errs, validateOwnFields(job)...)
	errs = append(errs, own.fields...)
	errs = append(errs, validateServiceLayout(job, spec)...)
	return append(errs, validateKueueLabels(job)...)
}

// frameworkErrors are a framework's errors, by where Validate puts them.
type frameworkErrors struct {
	// replicas are the errors at a type's replicas field, by path.
	replicas map[string]*field.Error
	// types are the errors about the job's replica types as a whole.
	types field.ErrorList
	// fields are the errors at the framework's own fields.
	fields field.ErrorList
}

func splitFrameworkErrors(errs field.ErrorList) frameworkErrors {
	out := frameworkErrors{replicas: map[string]*field.Error{}}
	specs := framework.SpecsPath.String()
	for _, e := range errs {
		switch {
		case strings.HasPrefix(e.Field, specs+".") && strings.HasSuffix(e.Field, ".replicas"):
			if _, seen := out.replicas[e.Field]; !seen {
				out.replicas[e.Field] = e
			}
		case e.Field == specs || strings.HasPrefix(e.Field, specs+"."):
			out.types = append(out.types, e)
		default:
			out.fields = append(out.fields, e)
		}
	}
	return out
}

func validateMetadata(job *v1alpha1.TrainJob) field.ErrorList {
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

// longestObjectName is the longest name among the objects the job creates
// whose names are DNS labels: every replica's pod and Service (an elastic
// job's counted up to its slots) and the progress endpoint's <job>-status
// Service. The framework's ConfigMaps and Secrets are named by DNS
// subdomains, which take 253 characters.
func longestObjectName(job *v1alpha1.TrainJob) string {
	longest := v1alpha1.TrainerStatusName(job.Name)
	for rt := range job.Spec.ReplicaSpecs {
		count := max(Replicas(job, rt), 1)
		if n := framework.ReplicaName(job.Name, rt, count-1); len(n) > len(longest) {
			longest = n
		}
	}
	return longest
}

func validateReplicaSpecs(job *v1alpha1.TrainJob, f framework.Framework, own frameworkErrors) field.ErrorList {
	var errs field.ErrorList
	specsPath := framework.SpecsPath
	allowed := f.Conventions().Types()
	if len(job.Spec.ReplicaSpecs) == 0 {
		return append(errs, field.Required(specsPath, fmt.Sprintf("%s needs at least one of %s", f.Name(), joinTypes(allowed))))
	}
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
		errs = append(errs, validateReplicaSpec(spec, p, own.replicas[p.Child("replicas").String()])...)
	}
	errs = append(errs, own.types...)
	errs = append(errs, validateTotalReplicas(job, specsPath)...)
	return errs
}

// validateTotalReplicas bounds the sum of every type's replicas, counted
// without int32 overflow. A type over the bound on its own is reported at
// its replicas field instead.
func validateTotalReplicas(job *v1alpha1.TrainJob, specsPath *field.Path) field.ErrorList {
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

// validateReplicaSpec checks one type's fields. Its replicas get at most one
// error: the framework's (framerr), else the first bound the count breaks.
func validateReplicaSpec(spec *v1alpha1.ReplicaSpec, p *field.Path, framerr *field.Error) field.ErrorList {
	var errs field.ErrorList
	replicas := spec.ReplicaCount()
	switch {
	case framerr != nil:
		errs = append(errs, framerr)
	case replicas < 0:
		errs = append(errs, field.Invalid(p.Child("replicas"), replicas, "must be >= 0"))
	case replicas > MaxReplicas:
		errs = append(errs, field.Invalid(p.Child("replicas"), replicas, fmt.Sprintf("must be at most %d, the most replicas a job may run", MaxReplicas)))
	}
	switch spec.RestartPolicy {
	case v1alpha1.RestartPolicyNever, v1alpha1.RestartPolicyOnFailure, v1alpha1.RestartPolicyAlways, v1alpha1.RestartPolicyExitCode:
	default:
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), spec.RestartPolicy,
			[]v1alpha1.RestartPolicy{v1alpha1.RestartPolicyNever, v1alpha1.RestartPolicyOnFailure, v1alpha1.RestartPolicyAlways, v1alpha1.RestartPolicyExitCode}))
	}
	codes := p.Child("retryableExitCodes")
	if len(spec.RetryableExitCodes) > 0 && spec.RestartPolicy != v1alpha1.RestartPolicyExitCode {
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

func validateContainers(spec *v1alpha1.ReplicaSpec, podPath *field.Path) field.ErrorList {
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

var (
	cleanPodPolicies = []v1alpha1.CleanPodPolicy{v1alpha1.CleanPodPolicyNone, v1alpha1.CleanPodPolicyRunning, v1alpha1.CleanPodPolicyAll}
	gangKinds        = []v1alpha1.GangKind{v1alpha1.GangNone, v1alpha1.GangBuiltin, v1alpha1.GangKubernetes, v1alpha1.GangSchedulerPlugins, v1alpha1.GangVolcano, v1alpha1.GangKueue}
)

func validateRunPolicy(job *v1alpha1.TrainJob, p *field.Path) field.ErrorList {
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
		errs = append(errs, validateSchedulingPolicy(rp.SchedulingPolicy, int32(TotalReplicas(job)), p.Child("schedulingPolicy"))...)
	}
	if rp.FailurePolicy != nil {
		errs = append(errs, validateFailurePolicy(job, rp.FailurePolicy, p.Child("failurePolicy"))...)
	}
	return errs
}

var (
	failureRestarts   = []v1alpha1.FailureRestart{v1alpha1.FailureRestartJob, v1alpha1.FailureRestartReplica}
	failureActions    = []v1alpha1.FailureAction{v1alpha1.FailureActionIgnore, v1alpha1.FailureActionRestartJob, v1alpha1.FailureActionRestartReplica, v1alpha1.FailureActionFailJob}
	exitCodeOps       = []v1alpha1.ExitCodesOperator{v1alpha1.ExitCodesOpIn, v1alpha1.ExitCodesOpNotIn}
	conditionStatuses = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}
)

func validateFailurePolicy(job *v1alpha1.TrainJob, fp *v1alpha1.FailurePolicy, p *field.Path) field.ErrorList {
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

func validateSchedulingPolicy(sp *v1alpha1.SchedulingPolicy, total int32, p *field.Path) field.ErrorList {
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
	if sp.Gang == v1alpha1.GangKueue && sp.Queue == "" {
		errs = append(errs, field.Required(p.Child("queue"), "gang kueue needs the Kueue LocalQueue name"))
	}
	return errs
}

func validateSuccessAndMetrics(job *v1alpha1.TrainJob, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch job.Spec.SuccessPolicy {
	case v1alpha1.SuccessPolicyDefault, v1alpha1.SuccessPolicyAllWorkers: // AllWorkers is TensorFlow's (OwnFields)
	default:
		errs = append(errs, field.NotSupported(spec.Child("successPolicy"), job.Spec.SuccessPolicy,
			[]v1alpha1.SuccessPolicy{v1alpha1.SuccessPolicyDefault, v1alpha1.SuccessPolicyAllWorkers}))
	}
	if job.Spec.MetricsFrom == "" {
		return errs
	}
	p := spec.Child("metricsFrom")
	rt, index, err := parseMetricsFrom(job.Spec.MetricsFrom)
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

func containsType(types []v1alpha1.ReplicaType, rt v1alpha1.ReplicaType) bool {
	return containsValue(types, rt)
}

func containsValue[T comparable](values []T, v T) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

func joinTypes(types []v1alpha1.ReplicaType) string {
	s := make([]string, len(types))
	for i, t := range types {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// validateOwnFields rejects a field (or value) that only another framework
// takes.
func validateOwnFields(job *v1alpha1.TrainJob) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for _, f := range table {
		if f.Name() == job.Spec.Framework {
			continue
		}
		for _, own := range f.OwnFields(&job.Spec) {
			if !own.Set {
				continue
			}
			if own.What != "" {
				errs = append(errs, field.Forbidden(spec.Child(own.Path), fmt.Sprintf("%s is only supported for framework %s", own.What, f.Name())))
			} else {
				errs = append(errs, field.Forbidden(spec.Child(own.Path), "only for framework "+string(f.Name())))
			}
		}
	}
	return errs
}

// validateServiceLayout checks spec.serviceLayout; a framework that runs
// under one layout only says so in its own validation.
func validateServiceLayout(job *v1alpha1.TrainJob, spec *field.Path) field.ErrorList {
	layout := job.Spec.ServiceLayout
	if layout != "" && !containsValue(v1alpha1.ServiceLayouts, layout) {
		return field.ErrorList{field.NotSupported(spec.Child("serviceLayout"), layout, v1alpha1.ServiceLayouts)}
	}
	return nil
}

// validateKueueLabels checks that the job's scheduling policy puts it where
// Kueue's labels on its metadata say (defaulting reads them in): a job
// labelled for a queue that would skip it is not run.
func validateKueueLabels(job *v1alpha1.TrainJob) field.ErrorList {
	var errs field.ErrorList
	sp := job.Spec.RunPolicy.SchedulingPolicy
	if sp == nil {
		sp = &v1alpha1.SchedulingPolicy{}
	}
	labels := field.NewPath("metadata", "labels")
	scheduling := field.NewPath("spec", "runPolicy", "schedulingPolicy")
	if queue := job.Labels[v1alpha1.LabelKueueQueueName]; queue != "" {
		p := labels.Key(v1alpha1.LabelKueueQueueName)
		switch {
		case sp.Gang != v1alpha1.GangKueue:
			errs = append(errs, field.Invalid(p, queue, fmt.Sprintf("puts the job in Kueue's queue, but %s is %q; leave it unset (or kueue), or remove the label",
				scheduling.Child("gang"), sp.Gang)))
		case sp.Queue != queue:
			errs = append(errs, field.Invalid(p, queue, fmt.Sprintf("names another queue than %s, %q: the job goes in one queue", scheduling.Child("queue"), sp.Queue)))
		}
	}
	if class := job.Labels[v1alpha1.LabelKueuePriorityClass]; class != "" && sp.WorkloadPriorityClass != class {
		errs = append(errs, field.Invalid(labels.Key(v1alpha1.LabelKueuePriorityClass), class,
			fmt.Sprintf("names another WorkloadPriorityClass than %s, %q", scheduling.Child("workloadPriorityClass"), sp.WorkloadPriorityClass)))
	}
	if sp.WorkloadPriorityClass != "" && sp.Gang != v1alpha1.GangKueue {
		errs = append(errs, field.Forbidden(scheduling.Child("workloadPriorityClass"), "only with gang kueue: it is the Kueue pod group's priority"))
	}
	return errs
}
