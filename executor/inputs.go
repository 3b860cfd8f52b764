package executor

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/sshkey"
)

// renderInputs gathers what the renderer needs besides the job: for a
// framework whose replicas log in to each other (MPI), the SSH key pair —
// the one an earlier attempt of the job's identity already stored (its
// replicas trust it), else a new one. A Secret of that name of another
// owner is never read, and the run ends Invalid.
func renderInputs(ctx context.Context, conn *connection, job *v1alpha1.TrainJob, id render.Identity, apiTimeout time.Duration) (render.Inputs, error) {
	name, publicKeyKey, ok := frameworks.SSHSecret(job, job.Name)
	if !ok {
		return render.Inputs{}, nil
	}
	existing, err := readOwnSecret(ctx, conn, id, name, apiTimeout)
	if err != nil {
		return render.Inputs{}, fmt.Errorf("reading the SSH secret %s: %w", name, err)
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
