package replicapolicy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// Notes are warnings about what trainstep adds to a valid job's pods that
// its templates seem not to expect: a ServiceAccount named without a token
// asked for (replicas mount none unless they ask), and metrics meant to be
// scraped while the job's NetworkPolicy admits only the job's own pods.
func Notes(job *v1alpha1.TrainJob, p Policy) []string {
	var notes []string
	for _, rt := range frameworks.SortedReplicaTypes(job) {
		rs := job.Spec.ReplicaSpecs[rt]
		if rs == nil {
			continue
		}
		pod := &rs.Template.Spec
		if sa := pod.ServiceAccountName; sa != "" && sa != "default" && pod.AutomountServiceAccountToken == nil {
			notes = append(notes, fmt.Sprintf("replica type %s: trainstep mounts no ServiceAccount token into replicas (automountServiceAccountToken: false) "+
				"unless the template sets automountServiceAccountToken: true; serviceAccountName %s alone gives the replica no credentials", rt, sa))
		}
		if scraped := scrapedBy(&rs.Template); scraped != "" && !p.NetworkPolicy.Disabled && len(p.NetworkPolicy.Ingress.Namespaces) == 0 {
			notes = append(notes, fmt.Sprintf("replica type %s: %s, but the job's NetworkPolicy admits connections to its replicas only from the job's own pods, "+
				"so Prometheus cannot scrape them; the template author admits a monitoring namespace with %s and %s",
				rt, scraped, SettingIngressNamespaces.how(), SettingIngressPorts.how()))
		}
	}
	return notes
}

// scrapedBy says how a template shows that its metrics are to be scraped:
// Prometheus' annotations or a container port named for metrics; "" when
// it does not.
func scrapedBy(t *corev1.PodTemplateSpec) string {
	for _, key := range sortedKeys(t.Annotations) {
		if strings.HasPrefix(key, "prometheus.io/") {
			return "the template carries Prometheus' annotations (" + key + ")"
		}
	}
	for _, c := range t.Spec.Containers {
		for _, port := range c.Ports {
			if strings.Contains(port.Name, "metrics") {
				return fmt.Sprintf("container %s serves metrics on port %d (%s)", c.Name, port.ContainerPort, port.Name)
			}
		}
	}
	return ""
}
