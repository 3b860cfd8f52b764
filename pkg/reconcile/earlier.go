package reconcile

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apierr"
)

var secretsResource = corev1.SchemeGroupVersion.WithResource("secrets")

// findEarlierSecrets looks for the job's Secrets an earlier attempt left,
// by name: Secrets are read by name, not watched, since list and watch
// would let the step read every Secret of its namespace at once. Only
// their metadata is read: one of this job's identity is re-attached; another
// of that name is not the job's, and its data never reaches this process
// (the create meets it and names it). A Secret deleted while the job runs
// is not created again: the pods that mounted it keep its files.
func (c *Controller) findEarlierSecrets(ctx context.Context) error {
	c.earlierSecrets = nil
	desired := c.opts.Desired.Secrets
	// Read together: a sweep's steps each wait one round trip, not one per Secret.
	found := make([]*corev1.Secret, len(desired))
	errs := c.parallel(ctx, len(desired), func(i int) error {
		var live *corev1.Secret
		err := apierr.Retry(ctx, func() (err error) {
			live, err = c.secretMetadata(ctx, desired[i].Name)
			return err
		})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading secret %s: %w", desired[i].Name, err)
		case c.ofThisJob(live.Labels):
			found[i] = live
		}
		return nil
	})
	if err := joinErrors(errs); err != nil {
		return err
	}
	for _, live := range found {
		if live != nil {
			_ = c.secrets.Add(live)
			c.earlierSecrets = append(c.earlierSecrets, live)
		}
	}
	return nil
}

// secretMetadata reads the metadata of the Secret name, as a Secret
// without data.
func (c *Controller) secretMetadata(ctx context.Context, name string) (*corev1.Secret, error) {
	ns := c.opts.Identity.Namespace
	if c.opts.Metadata != nil {
		m, err := c.opts.Metadata.Resource(secretsResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &corev1.Secret{ObjectMeta: m.ObjectMeta}, nil
	}
	s, err := c.opts.Core.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	s.Data, s.StringData = nil, nil
	return s, nil
}

// restoreConfigMaps makes the job's ConfigMaps an earlier attempt left
// hold what this run renders (TF_CONFIG's cluster, MPI's hostfile):
// adopting one means the replicas trust its contents, so one that differs
// is written back, with a Warning event.
func (c *Controller) restoreConfigMaps(ctx context.Context) error {
	ns := c.opts.Identity.Namespace
	for _, want := range c.opts.Desired.ConfigMaps {
		if c.configMaps == nil {
			return nil
		}
		if cached, err := c.configMaps.ConfigMaps(ns).Get(want.Name); err != nil || !c.ofThisJob(cached.Labels) {
			continue // none left, or not the job's: the create meets it
		}
		err := apierr.Retry(ctx, func() error {
			live, err := c.opts.Core.ConfigMaps(ns).Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil || equality.Semantic.DeepEqual(live.Data, want.Data) && equality.Semantic.DeepEqual(live.BinaryData, want.BinaryData) {
				return err
			}
			live.Data, live.BinaryData = want.Data, want.BinaryData
			if _, err := c.opts.Core.ConfigMaps(ns).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
				return err
			}
			c.event(corev1.EventTypeWarning, EventRestoredSpec, "ConfigMap %s of an earlier attempt did not hold the rendered data; restored", want.Name)
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("checking ConfigMap %s of an earlier attempt: %w", want.Name, err)
		}
	}
	return nil
}
