package frameworks

import (
	"github.com/trainstep/trainstep/pkg/kubeflow"
)

// KubeflowKind returns the Kubeflow kind of apiVersion and kind that a
// framework reads, or false.
func KubeflowKind(apiVersion, kind string) (kubeflow.Kind, bool) {
	for _, f := range table {
		for _, k := range f.Kubeflow() {
			if k.APIVersion == apiVersion && k.Kind == kind {
				return k, true
			}
		}
	}
	return kubeflow.Kind{}, false
}

// KubeflowKinds lists every Kubeflow kind the frameworks run, for error
// messages, in the table's order; a kind that only `trainstep convert`
// reads (a kubeflow.Upgrader) is not one.
func KubeflowKinds() []string {
	var out []string
	for _, f := range table {
		for _, k := range f.Kubeflow() {
			if _, upgrade := k.New().(kubeflow.Upgrader); !upgrade {
				out = append(out, k.String())
			}
		}
	}
	return out
}

// KubeflowUnsupported explains why a manifest that looks like a Kubeflow
// training job is not one the frameworks read, or returns "" when it is
// not a known look-alike.
func KubeflowUnsupported(apiVersion, kind string) string {
	return kubeflow.Unsupported(apiVersion, kind, func(apiVersion, kind string) bool {
		_, ok := KubeflowKind(apiVersion, kind)
		return ok
	})
}
