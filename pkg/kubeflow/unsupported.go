package kubeflow

import (
	"fmt"
	"strings"
)

// Unsupported explains why a manifest that looks like a Kubeflow training
// job cannot be read, or returns "" when apiVersion/kind is not one of the
// known look-alikes. read says whether trainstep reads a kind.
func Unsupported(apiVersion, kind string, read func(apiVersion, kind string) bool) string {
	group, version, _ := strings.Cut(apiVersion, "/")
	switch {
	case group == "trainer.kubeflow.org":
		return fmt.Sprintf("%s %s is Kubeflow Trainer v2, whose jobs come from a TrainingRuntime on the cluster; "+
			"trainstep reads the Training Operator v1 kinds instead", apiVersion, kind)
	case group != "kubeflow.org":
		return ""
	case kind == "MXJob":
		return fmt.Sprintf("%s %s: trainstep has no MXNet framework (Training Operator v1.9 no longer runs MXJobs either)", apiVersion, kind)
	case kind == "MPIJob":
		return fmt.Sprintf("%s MPIJob is an older MPIJob version; trainstep reads MPIJob %s (MPI Operator v2) and, through "+
			"`trainstep convert`, Training Operator's MPIJob %s", apiVersion, APIVersionV2beta1, APIVersionV1)
	case version != "v1" && read(APIVersionV1, kind):
		return fmt.Sprintf("%s %s is an older version; trainstep reads %s %s", apiVersion, kind, APIVersionV1, kind)
	}
	return ""
}
