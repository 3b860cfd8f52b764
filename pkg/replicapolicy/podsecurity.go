package replicapolicy

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/pod-security-admission/api"
	psa "k8s.io/pod-security-admission/policy"
)

// podSecurityCheck is one check of Kubernetes' pod-security library, at its
// latest version: the API server's PodSecurity admission runs the same.
type podSecurityCheck struct {
	id  psa.CheckID
	run psa.CheckPodFn
}

// podSecurityChecks are the checks of each level, in the library's order
// (by ID): a level's own and, for restricted, the baseline checks it does
// not override.
var podSecurityChecks = func() map[Level][]podSecurityCheck {
	all := psa.DefaultChecks()
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	latest := func(c psa.Check) psa.VersionedCheck { return c.Versions[len(c.Versions)-1] }
	overridden := map[psa.CheckID]bool{}
	for _, c := range all {
		if c.Level == api.LevelRestricted {
			for _, id := range latest(c).OverrideCheckIDs {
				overridden[id] = true
			}
		}
	}
	out := map[Level][]podSecurityCheck{}
	for _, c := range all {
		check := podSecurityCheck{id: c.ID, run: latest(c).CheckPod}
		if c.Level == api.LevelBaseline {
			out[LevelBaseline] = append(out[LevelBaseline], check)
		}
		if c.Level == api.LevelRestricted || !overridden[c.ID] {
			out[LevelRestricted] = append(out[LevelRestricted], check)
		}
	}
	return out
}()

// hostAccessChecks are the baseline checks of what --allow-privileged
// allows: privilege and the host's namespaces, files, ports and processes.
var hostAccessChecks = []psa.CheckID{"privileged", "hostNamespaces", "hostPathVolumes", "hostPorts", "capabilities_baseline", "windowsHostProcess"}

// checkPodSecurity judges a rendered pod at the policy's PodSecurity level
// and returns an error per offending field, with its path under template
// (the replica's pod template: the pod's metadata and spec are its own).
func checkPodSecurity(meta *metav1.ObjectMeta, spec *corev1.PodSpec, template *field.Path, p Policy) field.ErrorList {
	level := p.PodSecurity
	if level == "" {
		level = LevelBaseline
	}
	var errs field.ErrorList
	for _, check := range podSecurityChecks[level] {
		if p.AllowPrivileged && containsID(hostAccessChecks, check.id) {
			continue
		}
		res := check.run(meta, spec)
		if res.Allowed {
			continue
		}
		why := fmt.Sprintf("every replica's pod must pass PodSecurity %q (%s): %s", level, SettingPodSecurity.how(), res.ForbiddenReason)
		if res.ForbiddenDetail != "" {
			why += " (" + res.ForbiddenDetail + ")"
		}
		if containsID(hostAccessChecks, check.id) {
			why += "; " + SettingAllowPrivileged.how() + " allows it"
		}
		paths := locate(check, meta, spec, template)
		if len(paths) == 0 {
			paths = []*field.Path{template.Child("spec")}
		}
		for _, path := range paths {
			errs = append(errs, field.Forbidden(path, why))
		}
	}
	return errs
}

func containsID(ids []psa.CheckID, id psa.CheckID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// probe is a pod holding one field of the judged pod (or one container):
// the check that refused the whole pod, run on each probe, tells which
// field it refused, by the library's own rules.
type probe struct {
	path *field.Path
	meta metav1.ObjectMeta
	spec corev1.PodSpec
}

// containerLeaf is the field of a container each check reads, for the
// error's path.
var containerLeaf = map[psa.CheckID][]string{
	"privileged":                {"securityContext", "privileged"},
	"capabilities_baseline":     {"securityContext", "capabilities", "add"},
	"capabilities_restricted":   {"securityContext", "capabilities"},
	"hostPorts":                 {"ports"},
	"appArmorProfile":           {"securityContext", "appArmorProfile", "type"},
	"seLinuxOptions":            {"securityContext", "seLinuxOptions"},
	"procMount":                 {"securityContext", "procMount"},
	"seccompProfile_baseline":   {"securityContext", "seccompProfile", "type"},
	"seccompProfile_restricted": {"securityContext", "seccompProfile"},
	"windowsHostProcess":        {"securityContext", "windowsOptions", "hostProcess"},
	"allowPrivilegeEscalation":  {"securityContext", "allowPrivilegeEscalation"},
	"runAsNonRoot":              {"securityContext", "runAsNonRoot"},
	"runAsUser":                 {"securityContext", "runAsUser"},
}

// inheritedChecks are the checks a container passes through its pod's
// securityContext: its probe keeps the pod's.
var inheritedChecks = []psa.CheckID{"runAsNonRoot", "seccompProfile_restricted"}

// locate returns the paths of the fields of the pod that check refuses.
func locate(check podSecurityCheck, meta *metav1.ObjectMeta, spec *corev1.PodSpec, template *field.Path) []*field.Path {
	probes := podProbes(meta, spec, template)
	if leaf, ok := containerLeaf[check.id]; ok {
		var inherited *corev1.PodSecurityContext
		if containsID(inheritedChecks, check.id) {
			inherited = spec.SecurityContext
		}
		visitContainers(spec, template.Child("spec"), func(c *corev1.Container, cp *field.Path) {
			probes = append(probes, probe{path: cp.Child(leaf[0], leaf[1:]...),
				spec: corev1.PodSpec{SecurityContext: inherited, Containers: []corev1.Container{*c}}})
		})
	}
	var paths []*field.Path
	for _, pr := range probes {
		if !check.run(&pr.meta, &pr.spec).Allowed {
			paths = append(paths, pr.path)
		}
	}
	return paths
}

// podProbes isolate each pod-level field a check reads: the host
// namespaces, each field of the pod's securityContext, each sysctl, each
// volume and each annotation.
func podProbes(meta *metav1.ObjectMeta, spec *corev1.PodSpec, template *field.Path) []probe {
	sp := template.Child("spec")
	var probes []probe
	for _, ns := range []struct {
		name string
		on   bool
		set  func(*corev1.PodSpec)
	}{
		{"hostNetwork", spec.HostNetwork, func(s *corev1.PodSpec) { s.HostNetwork = true }},
		{"hostPID", spec.HostPID, func(s *corev1.PodSpec) { s.HostPID = true }},
		{"hostIPC", spec.HostIPC, func(s *corev1.PodSpec) { s.HostIPC = true }},
	} {
		if ns.on {
			pr := probe{path: sp.Child(ns.name)}
			ns.set(&pr.spec)
			probes = append(probes, pr)
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		scp := sp.Child("securityContext")
		one := func(name string, set func(*corev1.PodSecurityContext)) {
			pr := probe{path: scp.Child(name), spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{}}}
			set(pr.spec.SecurityContext)
			probes = append(probes, pr)
		}
		one("seLinuxOptions", func(s *corev1.PodSecurityContext) { s.SELinuxOptions = sc.SELinuxOptions })
		one("seccompProfile", func(s *corev1.PodSecurityContext) { s.SeccompProfile = sc.SeccompProfile })
		one("appArmorProfile", func(s *corev1.PodSecurityContext) { s.AppArmorProfile = sc.AppArmorProfile })
		one("runAsNonRoot", func(s *corev1.PodSecurityContext) { s.RunAsNonRoot = sc.RunAsNonRoot })
		one("runAsUser", func(s *corev1.PodSecurityContext) { s.RunAsUser = sc.RunAsUser })
		one("windowsOptions", func(s *corev1.PodSecurityContext) { s.WindowsOptions = sc.WindowsOptions })
		for i, sysctl := range sc.Sysctls {
			probes = append(probes, probe{path: scp.Child("sysctls").Index(i).Child("name"),
				spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{sysctl}}}})
		}
	}
	for i, v := range spec.Volumes {
		probes = append(probes, probe{path: sp.Child("volumes").Index(i).Child(volumeKind(&v)), spec: corev1.PodSpec{Volumes: []corev1.Volume{v}}})
	}
	for _, key := range sortedKeys(meta.Annotations) {
		probes = append(probes, probe{path: template.Child("metadata", "annotations").Key(key),
			meta: metav1.ObjectMeta{Annotations: map[string]string{key: meta.Annotations[key]}}})
	}
	return probes
}
