package render_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

const (
	ps        = v1alpha1.ReplicaTypePS
	worker    = v1alpha1.ReplicaTypeWorker
	chief     = v1alpha1.ReplicaTypeChief
	master    = v1alpha1.ReplicaTypeMaster
	evaluator = v1alpha1.ReplicaTypeEvaluator
	launcher  = v1alpha1.ReplicaTypeLauncher
)

type replicas = testutil.Replicas

// newJob builds a defaulted job whose replicas each run one container named
// as the framework's main container (MPI: "main"), changed by edits.
func newJob(fw v1alpha1.Framework, name string, shape replicas, edits ...func(*v1alpha1.TrainJob)) *v1alpha1.TrainJob {
	return testutil.NewJob(fw, name, "", shape, edits...)
}

// perReplica lays the job out as the Training Operator's Kubeflow manifests
// are: one Service per replica.
func perReplica(job *v1alpha1.TrainJob) { job.Spec.ServiceLayout = v1alpha1.ServiceLayoutPerReplica }

// owner is a step pod owning the job's objects.
var owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "wf-1-train-123", UID: "8d6a0a4e-0000-4000-8000-000000000001"}

func identity(ns, job string) render.Identity {
	return render.Identity{
		Namespace: ns,
		JobName:   job,
		Owner:     owner,
		Labels:    map[string]string{v1alpha1.LabelWorkflow: "wf-1"},
	}
}

// controllerRef is owner as the controller reference of every object.
func controllerRef() []metav1.OwnerReference {
	yes := true
	ref := *owner
	ref.Controller = &yes
	return []metav1.OwnerReference{ref}
}

var testKeys = render.Inputs{SSHPrivateKey: []byte("-----BEGIN PRIVATE KEY-----\n"), SSHPublicKey: []byte("ssh-ed25519 AAAAC3 test\n")}

func ptr[T any](v T) *T { return &v }
