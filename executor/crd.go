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

// checkPodGroupAPI makes sure the API server serves gvr, the PodGroup
// resource of the job's gang kind, before anything is created. It asks
// discovery, which every authenticated user may read, so no cluster-wide
// right is needed. A missing API is Invalid and says what the cluster
// lacks; an unreachable server is retried like the permission check.
func (c *connection) checkPodGroupAPI(ctx context.Context, apiTimeout time.Duration, gvr schema.GroupVersionResource) error {
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
	switch {
	case served:
		return nil
	case gvr == gang.KubernetesPodGroups:
		// Built in, but beta and off by default: a newer cluster or a flag away.
		return result.Invalid(result.ReasonInvalidSpec, fmt.Errorf(
			"schedulingPolicy.gang: kubernetes needs the PodGroup API (%s, podgroups), which this cluster does not serve: "+
				"it needs Kubernetes %s or later with the %s feature gate on kube-apiserver, kube-scheduler and kube-controller-manager "+
				"and kube-apiserver's --runtime-config=%s=true; or choose another gang kind",
			gvr.GroupVersion(), gang.KubernetesMinVersion, gang.KubernetesFeatureGate, gvr.GroupVersion()))
	}
	return result.Invalid(result.ReasonInvalidSpec, fmt.Errorf(
		"schedulingPolicy.gang needs the CustomResourceDefinition %s (%s), which this cluster does not serve: install the scheduler's CRDs or choose another gang kind",
		gang.CRDName(gvr), gvr.GroupVersion()))
}

// metricsAPI is the resource metrics API an elastic job's
// elasticPolicy.metrics are read from (metrics-server serves it).
var metricsAPI = schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}

// checkMetricsAPI refuses an elastic job with elasticPolicy.metrics on a
// cluster that does not serve the resource metrics API: nothing could
// evaluate them.
func (c *connection) checkMetricsAPI(ctx context.Context, apiTimeout time.Duration) error {
	served := false
	check := func() error {
		list, err := c.discovery.ServerResourcesForGroupVersion(metricsAPI.GroupVersion().String())
		if apierrors.IsNotFound(err) || apierrors.IsServiceUnavailable(err) {
			// An APIService whose backend is down answers 503: not served either.
			return nil
		}
		if err != nil {
			return classify(err)
		}
		for _, r := range list.APIResources {
			served = served || r.Name == metricsAPI.Resource
		}
		return nil
	}
	if err := retryTransient(ctx, apiTimeout, check); err != nil {
		return err
	}
	if !served {
		return result.Invalid(result.ReasonInvalidSpec, fmt.Errorf(
			"spec.elasticPolicy.metrics needs the resource metrics API (%s, pods), which this cluster does not serve: install metrics-server, or leave out metrics to grow into free capacity",
			metricsAPI.GroupVersion()))
	}
	return nil
}
