package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/result"
)

// createObject creates one rendered child with the typed client and
// returns the UID the API server gave it. A pod in its unstructured form
// (render.Renderer.PodObject: it carries a field the typed Pod lacks) goes
// through the dynamic client.
func createObject(ctx context.Context, client corev1client.CoreV1Interface, dyn dynamic.Interface, obj runtime.Object) (types.UID, error) {
	var created metav1.Object
	var err error
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		if o.GetAPIVersion() != "v1" || o.GetKind() != "Pod" {
			return "", fmt.Errorf("creating %s %s: not a kind trainstep creates unstructured", o.GetKind(), o.GetName())
		}
		if dyn == nil {
			return "", fmt.Errorf("creating pod %s: no dynamic client", o.GetName())
		}
		created, err = dyn.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Pod:
		created, err = client.Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Service:
		created, err = client.Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		created, err = client.ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Secret:
		created, err = client.Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		return "", fmt.Errorf("creating %T: not a kind trainstep creates", obj)
	}
	if err != nil {
		return "", err
	}
	return created.GetUID(), nil
}

// deletePod deletes exactly the instance given (UID precondition), so a
// replacement with the same name is never deleted by mistake.
func deletePod(ctx context.Context, client corev1client.CoreV1Interface, pod *corev1.Pod) error {
	return deletePodUID(ctx, client, pod.Namespace, pod.Name, pod.UID)
}

// deletePodWith deletes the pod name only if it is still the instance uid;
// force removes it at once (grace 0), for a pod whose node stopped
// answering: its kubelet cannot confirm a graceful delete, so the name
// would stay taken and no replacement could start.
func deletePodWith(ctx context.Context, client corev1client.CoreV1Interface, namespace, name string, uid types.UID, force bool) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if force {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	err := apierr.Retry(ctx, func() error { return client.Pods(namespace).Delete(ctx, name, opts) })
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// deletePodUID deletes the pod name only if it is still the instance uid.
// A transient error is retried in place; NotFound and a precondition
// conflict (another instance has the name now) mean there is nothing left
// to delete.
func deletePodUID(ctx context.Context, client corev1client.CoreV1Interface, namespace, name string, uid types.UID) error {
	return deletePodWith(ctx, client, namespace, name, uid, false)
}

// parallel runs n pieces of work with the controller's parallelism and
// returns each piece's error at its index.
func (c *Controller) parallel(ctx context.Context, n int, work func(i int) error) []error {
	errs := parallelize(ctx, c.opts.Parallelism, n, work)
	c.crashOnPanics(errs)
	return errs
}

// parallelize runs n pieces of work, at most workers at once (at least
// one). A piece that panics returns an InternalError.
func parallelize(ctx context.Context, workers, n int, work func(i int) error) []error {
	workers = max(workers, 1)
	errs := make([]error, n)
	started := make([]bool, n)
	workqueue.ParallelizeUntil(ctx, workers, n, func(i int) { started[i], errs[i] = true, recovered(work, i) })
	// ParallelizeUntil skips the pieces left when ctx ends: say so rather
	// than report them done.
	for i := range errs {
		if !started[i] {
			errs[i] = fmt.Errorf("not started: %w", context.Cause(ctx))
		}
	}
	return errs
}

func joinErrors(errs []error) error {
	var first []error
	for _, err := range errs {
		if err != nil {
			first = append(first, err)
			if len(first) == 5 { // enough to see the cause; the rest repeat it
				break
			}
		}
	}
	return errors.Join(first...)
}

// apiError classifies an error from the API server with apierr. A refusal
// that retrying cannot fix (401, 403 for a missing right, 400, 422) ends
// the run Invalid only while nothing was created; after that nothing ends
// Invalid. Anything else is retried until it has persisted for APITimeout,
// then the run ends Transient.
func (c *Controller) apiError(err error) error {
	var re *result.Error
	if errors.As(err, &re) {
		return err
	}
	if !c.createdAny.Load() && apierr.IsPermanent(err) {
		switch {
		case apierrors.IsUnauthorized(err):
			return result.Invalid(result.ReasonUnauthorized, err)
		case apierrors.IsForbidden(err):
			return result.Invalid(result.ReasonForbidden, err)
		default:
			return result.Invalid(result.ReasonInvalidSpec, err)
		}
	}
	now := c.opts.Clock.Now()
	if c.apiErrorsSince.IsZero() {
		c.apiErrorsSince = now
	}
	if c.opts.APITimeout > 0 && now.Sub(c.apiErrorsSince) > c.opts.APITimeout {
		return result.Transient(result.ReasonAPIUnreachable, fmt.Errorf("API errors for %s: %w", now.Sub(c.apiErrorsSince).Round(time.Second), err))
	}
	return err
}

// apiErrorOrNil is apiError for an error that may be nil.
func (c *Controller) apiErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return c.apiError(err)
}
