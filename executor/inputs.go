package executor

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/sshkey"
)

// renderInputs gathers what the renderer needs besides the job: for a
// framework whose replicas log in to each other (MPI), the SSH key pair — the one an earlier attempt already stored (its replicas
// trust it), else a new one. A Secret of that name without the job's label
// is someone else's: its key is never used, and the run ends Invalid.
func renderInputs(ctx context.Context, conn *connection, job *v1alpha1.TrainJob, apiTimeout time.Duration) (render.Inputs, error) {
	name, publicKeyKey, ok := frameworks.SSHSecret(job, job.Name)
	if !ok {
		return render.Inputs{}, nil
	}
	var existing *corev1.Secret
	err := retryTransient(ctx, apiTimeout, func() error {
		s, err := conn.core.Secrets(conn.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return classify(err)
		}
		existing = s
		return nil
	})
	if err != nil {
		return render.Inputs{}, fmt.Errorf("reading the SSH secret %s: %w", name, err)
	}
	if existing != nil && existing.Labels[v1alpha1.LabelJobName] != job.Name {
		owner := "no owner"
		if ref := metav1.GetControllerOf(existing); ref != nil {
			owner = "owner " + ref.Kind + " " + ref.Name
		}
		return render.Inputs{}, result.Invalid(result.ReasonNotOwned, fmt.Errorf(
			"secret %s exists and is not this job's (no %s=%s label, %s): trainstep neither uses nor deletes it; rename the job (--name) or remove the secret",
			name, v1alpha1.LabelJobName, job.Name, owner))
	}
	if existing != nil && len(existing.Data[corev1.SSHAuthPrivateKey]) > 0 {
		return render.Inputs{SSHPrivateKey: existing.Data[corev1.SSHAuthPrivateKey], SSHPublicKey: existing.Data[publicKeyKey]}, nil
	}
	private, public, err := sshkey.Generate()
	if err != nil {
		return render.Inputs{}, err
	}
	return render.Inputs{SSHPrivateKey: private, SSHPublicKey: public}, nil
}
