package local

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/render"
)

// EnvTerminationMessagePath tells a local process where to write what a
// container writes to /dev/termination-log: its termination message, which
// becomes the job's metrics. Rendered pods carry the same variable.
const EnvTerminationMessagePath = render.EnvTerminationMessagePath

// envVar is one resolved variable. fromPod marks a value read from the pod
// itself (its name, labels): a name, not an address to rewrite.
type envVar struct {
	name, value string
	fromPod     bool
}

// environment builds a replica's variables from its rendered container:
// values taken from the pod resolved locally, $(VAR) references expanded as
// the kubelet does, and peer addresses pointed at the local ports.
type environment struct {
	peers    *peerBook
	hostname string
	// local is what the job's framework rewrites itself; nil for nothing.
	local framework.Local
	// mounts maps a directory the pods mount (MPI's /etc/mpi) to the local
	// directory standing in for it.
	mounts map[string]string
	// configMaps holds the data of the ConfigMaps trainstep renders for the
	// job (TF_CONFIG's cluster), by name: the only ones a local process can read.
	configMaps map[string]map[string]string
}

// containerEnv returns the container's variables in order, after before
// (trainstep's own, which the container's may refer to and override), and
// a warning for each one that cannot be resolved on this machine (left out).
func (e *environment) containerEnv(self framework.ReplicaRef, pod *corev1.Pod, c *corev1.Container, path *field.Path, before []envVar) ([]envVar, []string) {
	var vars []envVar
	var warnings []string
	defined := map[string]string{}
	for _, v := range before {
		if !declares(c, v.name) {
			defined[v.name] = v.value
			vars = append(vars, v)
		}
	}
	for i, v := range c.Env {
		value := expand(v.Value, lookupIn(defined))
		if v.ValueFrom != nil {
			var ok bool
			value, ok = e.valueFrom(pod, v.ValueFrom)
			if !ok {
				warnings = append(warnings, fmt.Sprintf("%s: %s is not available to a local process; %s is left unset",
					path.Child("env").Index(i).Child("valueFrom"), describeSource(v.ValueFrom), v.Name))
				continue
			}
		}
		defined[v.Name] = value
		vars = append(vars, envVar{name: v.Name, value: value, fromPod: v.ValueFrom != nil && v.ValueFrom.FieldRef != nil})
	}
	if len(c.EnvFrom) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: ConfigMaps and Secrets are not available to a local process; ignored", path.Child("envFrom")))
	}
	vars, rewriteWarnings := e.pointAtLocalPeers(self, vars, defined)
	return vars, append(warnings, rewriteWarnings...)
}

// declares reports whether c sets variable name itself.
func declares(c *corev1.Container, name string) bool {
	for _, v := range c.Env {
		if v.Name == name {
			return true
		}
	}
	return false
}

// pointAtLocalPeers rewrites replica host names to 127.0.0.1, their ports
// to the replicas' local ports, and paths under what the pods mount to the
// local directories: what the framework rewrites itself (framework.Local)
// first. original holds the values before any rewrite.
func (e *environment) pointAtLocalPeers(self framework.ReplicaRef, vars []envVar, original map[string]string) ([]envVar, []string) {
	var warnings []string
	for i := range vars {
		v := &vars[i]
		if v.fromPod {
			continue
		}
		if e.local != nil {
			rewritten, handled, warning := e.local.LocalValue(v.name, v.value, self, lookupIn(original), e.peers)
			if warning != "" {
				warnings = append(warnings, warning)
			}
			if handled {
				v.value = rewritten
				continue
			}
		}
		v.value = e.localPath(e.peers.rewriteValue(v.value))
	}
	return vars, warnings
}

// localPath maps a path under a directory the pods mount (/etc/mpi/hostfile)
// to the local directory standing in for it.
func (e *environment) localPath(value string) string {
	for mount, dir := range e.mounts {
		if value == mount {
			return dir
		}
		if rest, ok := strings.CutPrefix(value, mount+"/"); ok {
			return dir + "/" + rest
		}
	}
	return value
}

// valueFrom resolves a variable taken from the pod itself, as the downward
// API would on this machine, or from a ConfigMap trainstep renders for the
// job. Other ConfigMaps, Secrets and resource limits do not exist locally.
func (e *environment) valueFrom(pod *corev1.Pod, src *corev1.EnvVarSource) (string, bool) {
	if ref := src.ConfigMapKeyRef; ref != nil {
		value, ok := e.configMaps[ref.Name][ref.Key]
		return value, ok
	}
	if src.FieldRef == nil {
		return "", false
	}
	path := src.FieldRef.FieldPath
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "spec.nodeName":
		return e.hostname, true
	case "spec.serviceAccountName":
		if pod.Spec.ServiceAccountName == "" {
			return "default", true
		}
		return pod.Spec.ServiceAccountName, true
	case "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs":
		return Loopback, true
	}
	// A key the pod lacks is "", as the kubelet resolves it.
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], true
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], true
	}
	return "", false
}

// subscript reads "prefix['key']" and returns key.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

func describeSource(src *corev1.EnvVarSource) string {
	switch {
	case src.FieldRef != nil:
		return "field " + src.FieldRef.FieldPath
	case src.ResourceFieldRef != nil:
		return "resource " + src.ResourceFieldRef.Resource
	case src.ConfigMapKeyRef != nil:
		return "ConfigMap " + src.ConfigMapKeyRef.Name
	case src.SecretKeyRef != nil:
		return "Secret " + src.SecretKeyRef.Name
	}
	return "the source"
}

func lookupIn(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// expand replaces $(NAME) with the value lookup finds, as the kubelet does
// for env values, command and args: "$$" is a literal "$", and a reference
// lookup does not know stays as written.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '$' && i+1 < len(s) {
			if s[i+1] == '$' {
				b.WriteByte('$')
				i += 2
				continue
			}
			if s[i+1] == '(' {
				if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
					if value, ok := lookup(s[i+2 : i+2+end]); ok {
						b.WriteString(value)
						i += end + 3
						continue
					}
				}
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// environ joins the base environment and vars; a later entry wins, as
// os/exec keeps the last of duplicate names.
func environ(base []string, vars []envVar) []string {
	out := make([]string, 0, len(base)+len(vars))
	out = append(out, base...)
	for _, v := range vars {
		out = append(out, v.name+"="+v.value)
	}
	return out
}
