// Package frameworks is the table of trainstep's training frameworks and
// what the rest of trainstep asks of a job's framework: its replicas,
// defaults and validation, its environment and objects, its success rule,
// its gang size, its Kubeflow kinds and what it needs on one machine.
//
// Everything trainstep knows about one framework is in its folder
// (tensorflow, pytorch, mpi, jax, xgboost, paddle), behind the
// framework.Framework interface; this package lists them in one table and
// answers for them, so no other package switches on a framework. Adding a
// framework is adding its folder and a line in the table.
//
// Like the frameworks, it only fills in pod specs and object bodies: it
// must not set object metadata, talk to a cluster, read the environment,
// or use randomness or the clock.
package frameworks

import (
	"fmt"
	"strings"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/frameworks/jax"
	"github.com/trainstep/trainstep/pkg/frameworks/mpi"
	"github.com/trainstep/trainstep/pkg/frameworks/paddle"
	"github.com/trainstep/trainstep/pkg/frameworks/pytorch"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
	"github.com/trainstep/trainstep/pkg/frameworks/xgboost"
)

// table lists every framework, in documentation order.
var table = []framework.Framework{
	tensorflow.Framework{},
	pytorch.Framework{},
	mpi.Framework{},
	jax.Framework{},
	xgboost.Framework{},
	paddle.Framework{},
}

// For returns framework fw.
func For(fw v1alpha1.Framework) (framework.Framework, error) {
	for _, f := range table {
		if f.Name() == fw {
			return f, nil
		}
	}
	return nil, fmt.Errorf("unsupported framework %q: supported are %s", fw, strings.Join(names(), ", "))
}

// Names lists every framework's name, in documentation order.
func Names() []v1alpha1.Framework {
	out := make([]v1alpha1.Framework, len(table))
	for i, f := range table {
		out[i] = f.Name()
	}
	return out
}

func names() []string {
	out := make([]string, len(table))
	for i, f := range table {
		out[i] = string(f.Name())
	}
	return out
}

// of returns the job's framework, or nil for an unknown one (validation
// rejects those before anything asks).
func of(job *v1alpha1.TrainJob) framework.Framework {
	f, _ := For(job.Spec.Framework)
	return f
}
