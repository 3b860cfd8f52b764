package executor

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
)

// admitPods asks the API server, by a server-side dry run, whether it admits the first pod
// of every replica type as rendered. PodSecurity, ValidatingAdmissionPolicies, LimitRanges
// and webhooks judge a pod only when it is created, after the job's Services exist, where
// a refusal could only be retried until --api-timeout; asked here, before anything is
// created, a refusal that retrying cannot fix ends the run Invalid with the API server's
// words. A full quota, a pod of that name that exists (a retried step) and a webhook that
// cannot answer a dry run say nothing about the spec: they pass.
func (c *connection) admitPods(ctx context.Context, apiTimeout time.Duration, renderer *render.Renderer) error {
	seen := map[v1alpha1.ReplicaType]bool{}
	for _, ref := range renderer.Replicas() {
		if seen[ref.Type] {
			continue
		}
		seen[ref.Type] = true
		pod, err := renderer.Pod(ref.Type, ref.Index, 0)
		if err != nil {
			return err
		}
		err = retryTransient(ctx, apiTimeout, func() error {
			reqCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			_, err := c.core.Pods(pod.Namespace).Create(reqCtx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			switch {
			case err == nil, apierr.IsQuotaExceeded(err), apierrors.IsAlreadyExists(err), refusesDryRun(err):
				return nil
			case apierr.IsTransient(err):
				return err
			}
			return classify(fmt.Errorf("the API server does not admit pod %s of replica type %s: %w", pod.Name, ref.Type, err))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// refusesDryRun reports the API server's answer when an admission webhook on pods has side
// effects and so cannot be asked about a dry run.
func refusesDryRun(err error) bool {
	return apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "does not support dry run")
}
