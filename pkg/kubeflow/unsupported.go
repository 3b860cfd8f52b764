package kubeflow

import (
	"fmt"
	"strings"
)

// Unsupported explains why a manifest that looks like a Kubeflow training
// job cannot be read, or returns "" when apiVersion/kind is not one of the
// known look-alikes.
func Unsupported(apiVersion, kind string) string {
	group, version, _ := strings.Cut(apiVersion, "/")
	switch {
	case group == "trainer.kubeflow.org":
		return fmt.Sprintf("%s %s is Kubeflow Trainer v2, whose jobs come from a TrainingRuntime on the cluster; "+
			"trainstep reads the Training Operator v1 kinds instead", apiVersion, kind)
	case group == "kubeflow.org" && kind == KindMPIJob:
		return fmt.Sprintf("%s MPIJob is an older MPIJob version; trainstep reads MPIJob %s (MPI Operator v2)",
			apiVersion, APIVersionV2beta1)
	case group == "kubeflow.org" && (kind == "PaddleJob" || kind == "MXJob"):
		return fmt.Sprintf("%s %s: trainstep has no %s framework", apiVersion, kind, strings.TrimSuffix(kind, "Job"))
	case group == "kubeflow.org" && version != "v1":
		if _, ok := New(APIVersionV1, kind); ok {
			return fmt.Sprintf("%s %s is an older version; trainstep reads %s %s", apiVersion, kind, APIVersionV1, kind)
		}
	}
	return ""
}
