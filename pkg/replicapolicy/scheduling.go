package replicapolicy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
)

// ControlPlaneTaints are the taints of control-plane nodes: a replica that
// tolerates them may run beside the API server and etcd.
var ControlPlaneTaints = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// checkScheduling holds where and how a replica runs to the lists: its
// priority class, runtime class and scheduler, and its tolerations.
func checkScheduling(job *v1alpha1.TrainJob, pod *corev1.PodSpec, path *field.Path, p Policy) field.ErrorList {
	var errs field.ErrorList
	if pod.PriorityClassName != "" {
		errs = append(errs, checkPriorityClass(pod.PriorityClassName, path.Child("priorityClassName"), p)...)
	}
	if rc := pod.RuntimeClassName; rc != nil && *rc != "" && !Matches(p.RuntimeClasses, *rc) {
		errs = append(errs, field.Forbidden(path.Child("runtimeClassName"), fmt.Sprintf(
			"runtime class %q is not allowed: a runtime class chooses how isolated the replica is from its node; the template author allows classes with %s (%s)",
			*rc, SettingRuntimeClasses.how(), describe(p.RuntimeClasses))))
	}
	if s := pod.SchedulerName; s != "" && s != corev1.DefaultSchedulerName && s != gang.ForPods(job, job.Name).SchedulerName && !Matches(p.Schedulers, s) {
		errs = append(errs, field.Forbidden(path.Child("schedulerName"), fmt.Sprintf(
			"scheduler %q is not allowed: a scheduler decides what the replica may preempt and where it runs; a replica may name %s, its gang's scheduler, and those the template author lists with %s (%s)",
			s, corev1.DefaultSchedulerName, SettingSchedulers.how(), describe(p.Schedulers))))
	}
	if !p.AllowPrivileged {
		for i, t := range pod.Tolerations {
			if tp := controlPlaneToleration(t, path.Child("tolerations").Index(i)); tp != nil {
				errs = append(errs, forbidden(tp, "a replica may not tolerate the control plane's taints ("+strings.Join(ControlPlaneTaints, ", ")+") nor every taint"))
			}
		}
	}
	return errs
}

// controlPlaneToleration returns the path of what makes t tolerate a
// control-plane taint: its key, or its operator Exists without a key (every
// taint); nil when it does not.
func controlPlaneToleration(t corev1.Toleration, path *field.Path) *field.Path {
	switch {
	case t.Key == "" && t.Operator == corev1.TolerationOpExists:
		return path.Child("operator")
	case contains(ControlPlaneTaints, t.Key):
		return path.Child("key")
	}
	return nil
}

// checkPriorityClass holds a priority class to the list. A pattern never
// allows Kubernetes' own classes (system-node-critical,
// system-cluster-critical): a replica with one preempts any pod of the
// cluster, so only their exact name allows them.
func checkPriorityClass(name string, path *field.Path, p Policy) field.ErrorList {
	allowed := contains(p.PriorityClasses, name) || (!strings.HasPrefix(name, "system-") && Matches(p.PriorityClasses, name))
	if allowed {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"priority class %q is not allowed: a priority class lets the job preempt other tenants' pods; the template author allows classes with %s (%s; a system-* class only by its exact name)",
		name, SettingPriorityClasses.how(), describe(p.PriorityClasses)))}
}
