// Package replicapolicy holds a job's replicas to what the installation
// allows. By default a replica's pod may not reach beyond itself: no
// privileged or host-namespace pod, no hostPath volume or host port, no
// capability beyond PodSecurity `restricted`'s, no nodeName; no Secret,
// ConfigMap, PersistentVolumeClaim, CSI driver, priority class, runtime
// class or scheduler but its job's own and those the template author lists;
// no volume kind that reaches outside the pod; no label or annotation in a
// key space trainstep, Argo or the gang schedulers read; and every rendered
// pod at least PodSecurity `baseline`, judged by Kubernetes' own
// pod-security library. The step's ServiceAccount may create pods in the
// namespace, so whatever a replica may mount, read or claim, any submitter
// of a workflow may.
//
// It is pure: it reads a defaulted TrainJob (Check) or the objects a
// Renderer renders (CheckRendered) and returns field errors; it must not
// change the job nor talk to a cluster. Settings parses the template
// author's settings (the trainstep-policy ConfigMap's keys).
package replicapolicy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/render"
)

// restrictedCapabilities are the only capabilities PodSecurity `restricted`
// lets a container add.
var restrictedCapabilities = []corev1.Capability{"NET_BIND_SERVICE"}

// Policy is what the installation allows a job's replicas. Its zero value
// is the strictest: each list allows nothing but the job's own objects.
// List entries are names or patterns where `*` stands for any run of
// characters (`wandb-*`); `*` alone allows every name.
type Policy struct {
	// AllowPrivileged lifts the host checks: privileged containers, host
	// namespaces, hostPath volumes, host ports, added capabilities,
	// allowPrivilegeEscalation, nodeName and control-plane tolerations, and
	// the PodSecurity `baseline` checks of the same fields. For clusters
	// whose jobs need a device or the host's network (RDMA, some GPU
	// setups); such a replica can take over its node.
	AllowPrivileged bool
	// ServiceAccounts a replica may name in serviceAccountName besides the
	// namespace's default one. Empty allows only the default.
	ServiceAccounts []string
	// Secrets a replica may mount, project, read into its environment or
	// pull images with, besides its job's own (<job>-ssh, <job>-status).
	Secrets []string
	// ConfigMaps a replica may mount or read besides its job's own and the
	// namespace's kube-root-ca.crt.
	ConfigMaps []string
	// PVCs are the PersistentVolumeClaims a replica may mount, and the data
	// sources its ephemeral volumes may be made from (a claim by name,
	// another kind as Kind/name, e.g. VolumeSnapshot/nightly-*).
	PVCs []string
	// CSIDrivers a replica's inline CSI volumes may use.
	CSIDrivers []string
	// VolumeTypes are volume kinds allowed besides those that carry no other
	// tenant's data (emptyDir, configMap, secret, downwardAPI, projected,
	// persistentVolumeClaim, ephemeral; csi by driver): nfs, iscsi, image….
	VolumeTypes []string
	// PriorityClasses a replica's priorityClassName and the job's
	// schedulingPolicy.priorityClass may name. A system-* class must be
	// listed by its exact name.
	PriorityClasses []string
	// RuntimeClasses a replica's runtimeClassName may name.
	RuntimeClasses []string
	// Schedulers a replica's schedulerName may name besides
	// default-scheduler and the scheduler of the job's gang kind.
	Schedulers []string
	// PodSecurity is the level every rendered pod must pass: baseline
	// (the default, "") or restricted.
	PodSecurity Level
	// MaxRenderedBytes bounds the job's rendered size: its pods, Services,
	// ConfigMaps and Secrets as JSON. 0 is DefaultMaxRenderedBytes.
	MaxRenderedBytes int64
	// NetworkPolicy is what the job's NetworkPolicy admits besides the
	// job's own pods.
	NetworkPolicy NetworkPolicySettings
	// Local says the replicas run as processes of this machine (run
	// --local): a namespace's Secrets, ConfigMaps and volumes do not exist
	// there, so their allow-lists are not checked.
	Local bool
}

// NetworkPolicySettings are the NetworkPolicy's settings.
type NetworkPolicySettings struct {
	// Disabled creates no NetworkPolicy (run --network-policy=false).
	Disabled bool
	// Ingress is what it admits besides the job's own pods.
	Ingress render.IngressAllowance
}

// Check returns every field of job's replica templates the policy refuses,
// with its path (spec.replicaSpecs.Worker.template.spec...), in a stable
// order.
func Check(job *v1alpha1.TrainJob, p Policy) field.ErrorList {
	var errs field.ErrorList
	specs := field.NewPath("spec", "replicaSpecs")
	own := ownObjects(job)
	for _, rt := range frameworks.SortedReplicaTypes(job) {
		rs := job.Spec.ReplicaSpecs[rt]
		if rs == nil {
			continue
		}
		template := specs.Child(string(rt), "template")
		errs = append(errs, checkReservedKeys(&rs.Template.ObjectMeta, template.Child("metadata"))...)
		errs = append(errs, checkPod(job, &rs.Template.Spec, template.Child("spec"), p, own)...)
	}
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.PriorityClass != "" {
		path := field.NewPath("spec", "runPolicy", "schedulingPolicy", "priorityClass")
		errs = append(errs, checkPriorityClass(sp.PriorityClass, path, p)...)
	}
	return errs
}

func checkPod(job *v1alpha1.TrainJob, pod *corev1.PodSpec, path *field.Path, p Policy, own ownNames) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, checkServiceAccount(pod, path, p)...)
	errs = append(errs, checkScheduling(job, pod, path, p)...)
	if !p.Local {
		errs = append(errs, checkVolumes(pod, path, p, own)...)
		errs = append(errs, checkEnvReferences(pod, path, p, own)...)
		for i, s := range pod.ImagePullSecrets {
			errs = append(errs, checkSecret(s.Name, path.Child("imagePullSecrets").Index(i).Child("name"), p, own)...)
		}
	}
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
	visitContainers(pod, path, func(c *corev1.Container, cp *field.Path) {
		errs = append(errs, checkContainer(c, cp)...)
	})
	return errs
}

// visitContainers calls f with every container of pod, init and ephemeral
// ones included, and its path.
func visitContainers(pod *corev1.PodSpec, path *field.Path, f func(*corev1.Container, *field.Path)) {
	for i := range pod.InitContainers {
		f(&pod.InitContainers[i], path.Child("initContainers").Index(i))
	}
	for i := range pod.Containers {
		f(&pod.Containers[i], path.Child("containers").Index(i))
	}
	for i := range pod.EphemeralContainers {
		c := corev1.Container(pod.EphemeralContainers[i].EphemeralContainerCommon)
		f(&c, path.Child("ephemeralContainers").Index(i))
	}
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
			"ServiceAccount %q is not in the allow-list (%s); the template author lists more with %s",
			f.value, allowed, SettingServiceAccounts.how())))
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
	if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
		errs = append(errs, forbidden(sp.Child("allowPrivilegeEscalation"), "a process may not gain more privileges than its parent (set it false or leave it out)"))
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

// forbidden is a refusal that --allow-privileged lifts; the error says so.
func forbidden(path *field.Path, why string) *field.Error {
	return field.Forbidden(path, why+"; "+SettingAllowPrivileged.how()+" allows it")
}
