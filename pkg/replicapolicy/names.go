package replicapolicy

import (
	"strings"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
)

// RootCAConfigMap is the ConfigMap every namespace holds with the cluster's
// CA (public): the projected volume of a mounted ServiceAccount token reads
// it, so it is always allowed.
const RootCAConfigMap = "kube-root-ca.crt"

// ownNames are the Secrets and ConfigMaps trainstep creates for a job:
// a replica may use them without a list.
type ownNames struct {
	secrets, configMaps []string
}

// ownObjects are the names of the job's own Secrets (its framework's SSH
// key, the progress endpoint's CA and token — not its serving key) and
// ConfigMaps (its framework's: MPI's hostfile, TensorFlow's cluster), as
// its framework makes them.
func ownObjects(job *v1alpha1.TrainJob) ownNames {
	own := ownNames{secrets: []string{v1alpha1.TrainerStatusName(job.Name)}, configMaps: []string{RootCAConfigMap}}
	if name, _, ok := frameworks.SSHSecret(job, job.Name); ok {
		own.secrets = append(own.secrets, name)
	}
	own.configMaps = append(own.configMaps, frameworks.ConfigMapNames(job, job.Name)...)
	return own
}

// Matches reports whether name is one of patterns: equal to one, or
// matching one in which `*` stands for any run of characters.
func Matches(patterns []string, name string) bool {
	for _, p := range patterns {
		if p == name {
			return true
		}
		if strings.Contains(p, "*") && glob(p, name) {
			return true
		}
	}
	return false
}

// glob matches name against pattern, where `*` is any run of characters.
func glob(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(name, part)
		if i < 0 {
			return false
		}
		name = name[i+len(part):]
	}
	return len(name) >= len(last) && strings.HasSuffix(name, last)
}

// describe says what a list allows, for an error.
func describe(list []string) string {
	if len(list) == 0 {
		return "none is listed"
	}
	return "listed: " + strings.Join(list, ", ")
}
