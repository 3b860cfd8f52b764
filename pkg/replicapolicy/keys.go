package replicapolicy

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ReservedDomains are the label and annotation key prefixes a template may
// not use: trainstep's own (a template's trainstep.dev/trainer-status puts a
// replica behind another job's progress Service), Argo's (its controller
// reconciles pods by them), and those Kueue, JobSet and the gang schedulers
// read to put a pod in a group or a queue. Domains are exact: a
// subdomain of its own (kwok.trainstep.dev) is the template's.
var ReservedDomains = []string{
	"trainstep.dev",
	"workflows.argoproj.io",
	"kueue.x-k8s.io",
	"jobset.sigs.k8s.io",
	"scheduling.x-k8s.io",
	"pod-group.scheduling.sigs.k8s.io",
	"scheduling.k8s.io",
	"volcano.sh",
	"scheduling.volcano.sh",
	"batch.volcano.sh",
}

// ReservedDomain returns the reserved domain of a label or annotation key,
// "" when its domain is not reserved.
func ReservedDomain(key string) string {
	domain, _, found := strings.Cut(key, "/")
	if found && contains(ReservedDomains, domain) {
		return domain
	}
	return ""
}

// checkReservedKeys refuses the template's labels and annotations in a
// reserved domain, naming each key.
func checkReservedKeys(meta *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name   string
		values map[string]string
	}{{"labels", meta.Labels}, {"annotations", meta.Annotations}} {
		for _, key := range sortedKeys(f.values) {
			if domain := ReservedDomain(key); domain != "" {
				errs = append(errs, field.Forbidden(path.Child(f.name).Key(key), fmt.Sprintf(
					"the key space %s/ is reserved: trainstep sets what a replica's pod needs of it, and %s read it from every pod (set the job's gang and queue with spec.runPolicy.schedulingPolicy or --gang)",
					domain, readerOf(domain))))
			}
		}
	}
	return errs
}

// readerOf names who reads a reserved domain's keys.
func readerOf(domain string) string {
	switch domain {
	case "trainstep.dev":
		return "trainstep's Services and controller"
	case "workflows.argoproj.io":
		return "Argo's workflow controller"
	}
	return "the schedulers and queues"
}
