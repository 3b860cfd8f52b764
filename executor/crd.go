package executor

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/result"
)

// checkCRD makes sure the API server serves gvr (a PodGroup CRD) before
// anything is created. It asks discovery, which every authenticated user may
// read, so no cluster-wide right is needed. A missing CRD is Invalid and
// named; an unreachable server is retried like the permission check.
func (c *connection) checkCRD(ctx context.Context, apiTimeout time.Duration, gvr schema.GroupVersionResource) error {
	served := false
	check := func() error {
		list, err := c.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return classify(err)
		}
		for _, r := range list.APIResources {
			if r.Name == gvr.Resource {
				served = true
			}
		}
		return nil
	}
	if err := retryTransient(ctx, apiTimeout, check); err != nil {
		return err
	}
	if !served {
		return result.Invalid(result.ReasonInvalidSpec, fmt.Errorf(
			"schedulingPolicy.gang needs the CustomResourceDefinition %s (%s), which this cluster does not serve: install the scheduler's CRDs or choose another gang kind",
			gang.CRDName(gvr), gvr.GroupVersion()))
	}
	return nil
}
