package executor

import (
	"fmt"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// checkRendered renders the job as `trainstep validate` does, without a
// cluster, and holds every pod to the replica policy's PodSecurity level
// and the job to its rendered size, before anything is asked of the API
// server: what it refuses ends the run Invalid.
func checkRendered(cfg *Config, job *v1alpha1.TrainJob) error {
	id := render.Identity{Namespace: job.Namespace, JobName: job.Name}
	if id.Namespace == "" {
		id.Namespace = cfg.PodNamespace
	}
	renderer, err := render.NewRenderer(job, id)
	if err != nil {
		return result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	shared, err := renderer.SharedObjects(plannedInputs(job))
	if err != nil {
		return result.Invalid(result.ReasonInvalidSpec, fmt.Errorf("rendering the job: %w", err))
	}
	policy := cfg.SpecOptions.Policy
	if !cfg.NoNetworkPolicy {
		shared.NetworkPolicy = render.NetworkPolicyAdmitting(job, id, policy.NetworkPolicy.Ingress)
	}
	return spec.PolicyError(cfg.Spec, replicapolicy.CheckRendered(renderer, shared, policy))
}
