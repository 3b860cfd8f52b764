// Package replicapolicy holds a job's replica pod templates to what the
// installation allows: by default no privileged or host-namespace pod, no
// hostPath volume or host port, no capability beyond PodSecurity
// `restricted`'s, no nodeName, and a serviceAccountName only from the list
// the template author gives. The step's own ServiceAccount holds the rights
// to create and delete pods in the namespace; a replica that could run as
// it, or on the host, could turn those rights against the namespace.
//
// It is pure: it reads a defaulted TrainJob and returns field errors; it
// must not change the job nor talk to a cluster.
package replicapolicy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// AllowPrivilegedFlag is the command-line flag that sets
// Policy.AllowPrivileged; errors name it so a reader knows the way out.
const AllowPrivilegedFlag = "--allow-privileged"

// AllowedServiceAccountsFlag is the command-line flag that sets
// Policy.ServiceAccounts.
const AllowedServiceAccountsFlag = "--allowed-service-accounts"

// restrictedCapabilities are the only capabilities PodSecurity `restricted`
// lets a container add.
var restrictedCapabilities = []corev1.Capability{"NET_BIND_SERVICE"}

// Policy is what the installation allows a replica's pod template.
type Policy struct {
	// AllowPrivileged lifts the host checks: privileged containers, host
	// namespaces, hostPath volumes, host ports, added capabilities and
	// nodeName. For clusters whose jobs need a device or the host's
	// network (RDMA, some GPU setups); such a replica can take over its node.
	AllowPrivileged bool
	// ServiceAccounts a replica may name in serviceAccountName besides the
	// namespace's default one. Empty allows only the default.
	ServiceAccounts []string
}

// Check returns every field of job's replica templates the policy refuses,
// with its path (spec.replicaSpecs.Worker.template.spec...), in a stable
// order.
func Check(job *v1alpha1.TrainJob, p Policy) field.ErrorList {
	var errs field.ErrorList
	specs := field.NewPath("spec", "replicaSpecs")
	for _, rt := range frameworks.SortedReplicaTypes(job) {
		rs := job.Spec.ReplicaSpecs[rt]
		if rs == nil {
			continue
		}
		podPath := specs.Child(string(rt), "template", "spec")
		errs = append(errs, checkPod(&rs.Template.Spec, podPath, p)...)
	}
	return errs
}

func checkPod(pod *corev1.PodSpec, path *field.Path, p Policy) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, checkServiceAccount(pod, path, p)...)
	if p.AllowPrivileged {
		return errs
	}
	host := func(name string, on bool) {
		if on {
			errs = append(errs, forbidden(path.Child(name), "the host's namespaces are not for replicas"))
		}
	}
	host("hostNetwork", pod.HostNetwork)
	host("hostPID", pod.HostPID)
	host("hostIPC", pod.HostIPC)
	if pod.NodeName != "" {
		errs = append(errs, forbidden(path.Child("nodeName"), "a replica's node is the scheduler's choice (use nodeSelector or affinity)"))
	}
	for i, v := range pod.Volumes {
		if v.HostPath != nil {
			errs = append(errs, forbidden(path.Child("volumes").Index(i).Child("hostPath"), "hostPath volumes expose the node's files"))
		}
	}
	for i := range pod.InitContainers {
		errs = append(errs, checkContainer(&pod.InitContainers[i], path.Child("initContainers").Index(i))...)
	}
	for i := range pod.Containers {
		errs = append(errs, checkContainer(&pod.Containers[i], path.Child("containers").Index(i))...)
	}
	for i := range pod.EphemeralContainers {
		c := corev1.Container(pod.EphemeralContainers[i].EphemeralContainerCommon)
		errs = append(errs, checkContainer(&c, path.Child("ephemeralContainers").Index(i))...)
	}
	return errs
}

// checkServiceAccount holds serviceAccountName (and its deprecated alias
// serviceAccount) to the allow-list: the namespace's default ServiceAccount
// is always allowed.
func checkServiceAccount(pod *corev1.PodSpec, path *field.Path, p Policy) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name, value string
	}{{"serviceAccountName", pod.ServiceAccountName}, {"serviceAccount", pod.DeprecatedServiceAccount}} {
		if f.value == "" || f.value == "default" || slices.Contains(p.ServiceAccounts, f.value) {
			continue
		}
		allowed := "only the namespace's default ServiceAccount is allowed"
		if len(p.ServiceAccounts) > 0 {
			allowed = "allowed: default, " + strings.Join(p.ServiceAccounts, ", ")
		}
		errs = append(errs, field.Forbidden(path.Child(f.name), fmt.Sprintf(
			"ServiceAccount %q is not in the allow-list (%s); the template author lists more with %s", f.value, allowed, AllowedServiceAccountsFlag)))
	}
	return errs
}

func checkContainer(c *corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, port := range c.Ports {
		if port.HostPort != 0 {
			errs = append(errs, forbidden(path.Child("ports").Index(i).Child("hostPort"), "host ports bind the node's network"))
		}
	}
	sc := c.SecurityContext
	if sc == nil {
		return errs
	}
	sp := path.Child("securityContext")
	if sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, forbidden(sp.Child("privileged"), "a privileged container owns its node"))
	}
	if sc.Capabilities != nil {
		for i, capability := range sc.Capabilities.Add {
			name := corev1.Capability(strings.TrimPrefix(strings.ToUpper(string(capability)), "CAP_"))
			if !slices.Contains(restrictedCapabilities, name) {
				errs = append(errs, forbidden(sp.Child("capabilities", "add").Index(i),
					fmt.Sprintf("capability %s is beyond PodSecurity restricted's (NET_BIND_SERVICE)", capability)))
			}
		}
	}
	return errs
}

func forbidden(path *field.Path, why string) *field.Error {
	return field.Forbidden(path, why+"; "+AllowPrivilegedFlag+" allows it")
}
