package reconcile

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
)

// The step is a deputy of whoever submits a workflow: it uses and deletes
// only objects it can prove are its job's — labelled with the job and with
// the owner identity this run proved (Identity.OwnerID), and owned by this
// run (or by none, when the run has no owner); the earlier run's objects
// were given this run's owner by adopt before any create. The job name
// alone proves nothing: a submitter chooses it.

// ofThisJob reports whether labels carry the job's name and this run's
// owner identity.
func (c *Controller) ofThisJob(labels map[string]string) bool {
	return labels[v1alpha1.LabelJobName] == c.opts.Identity.JobName &&
		labels[v1alpha1.LabelIdentity] == c.opts.Identity.OwnerID
}

// ownedBy reports whether obj is this job's, as controls does for pods.
func (c *Controller) ownedBy(obj metav1.Object) bool {
	if !c.ofThisJob(obj.GetLabels()) {
		return false
	}
	if owner := c.opts.Identity.Owner; owner != nil {
		return metav1.IsControlledBy(obj, &metav1.ObjectMeta{UID: owner.UID})
	}
	return metav1.GetControllerOfNoCopy(obj) == nil
}

// notOwned is the Invalid error of an object that is in the job's way.
func notOwned(kind, name string, obj metav1.Object) error {
	return result.Invalid(result.ReasonNotOwned, fmt.Errorf("%s %s exists and is not this job's (%s): trainstep neither uses nor deletes it; rename the job (--name) or remove the %s",
		kind, name, DescribeOwnership(obj), kind))
}

// DescribeOwnership says whose an object is, for an error that names it:
// its job-name and identity labels and its controller.
func DescribeOwnership(obj metav1.Object) string {
	who := "no owner"
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		who = "owner " + ref.Kind + " " + ref.Name
	}
	describe := func(key string) string {
		if v, ok := obj.GetLabels()[key]; ok {
			return key + "=" + v
		}
		return "no " + key + " label"
	}
	return describe(v1alpha1.LabelJobName) + ", " + describe(v1alpha1.LabelIdentity) + ", " + who
}

// checkExisting reads the object that made the create of obj fail with
// AlreadyExists: nil when it is this job's (a create retried after a lost
// answer), an Invalid error naming it and its owner when it is not.
func (c *Controller) checkExisting(ctx context.Context, obj runtime.Object) (types.UID, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	ns, name, core := m.GetNamespace(), m.GetName(), c.opts.Core
	var live metav1.Object
	kind := strings.ToLower(fmt.Sprintf("%T", obj))
	err = apierr.Retry(ctx, func() (err error) {
		switch obj.(type) {
		case *corev1.Service:
			kind = "service"
			live, err = core.Services(ns).Get(ctx, name, metav1.GetOptions{})
		case *corev1.ConfigMap:
			kind = "configmap"
			live, err = core.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		case *corev1.Secret:
			kind = "secret"
			// Its metadata only: a Secret not the job's is never read.
			live, err = c.secretMetadata(ctx, name)
		default:
			return fmt.Errorf("checking %s %s: not a kind trainstep creates", kind, name)
		}
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil // gone meanwhile: created again on the next sync
	case err != nil:
		return "", fmt.Errorf("reading %s %s that already exists: %w", kind, name, err)
	case !c.ownedBy(live):
		c.event(corev1.EventTypeWarning, EventNotOwned, "%s %s exists but is not this job's; not using it", kind, name)
		return "", notOwned(kind, name, live)
	}
	return live.GetUID(), nil
}

// knownUID is the UID of the job's own instance of a job-wide object: the
// one this run created or re-attached, else one in the cache that this run
// owns. "" when none is known: an object of that name, if any, is not the
// job's.
func (c *Controller) knownUID(obj runtime.Object) types.UID {
	c.mu.Lock()
	uid := c.createdUIDs[childKey(obj)]
	c.mu.Unlock()
	if uid != "" {
		return uid
	}
	for _, child := range c.jobWide {
		if childKey(child.obj) != childKey(obj) {
			continue
		}
		// What adopt re-attached is in createdUIDs; a labelled object that
		// came later is the job's only if this run owns it.
		return c.ownedCachedUID(child)
	}
	return ""
}

// ownedCachedUID is the UID of the cached object of child's name when this
// run owns it, "" when none is cached or it is not the job's.
func (c *Controller) ownedCachedUID(child jobWideChild) types.UID {
	if cached, ok, _ := child.cache.GetByKey(child.key); ok {
		if m, err := meta.Accessor(cached); err == nil && c.ownedBy(m) {
			return m.GetUID()
		}
	}
	return ""
}

// Disown clears the owner of every object of the job in the caches (pods,
// Services, ConfigMaps, and the Secrets this run created or re-attached)
// when it is a pod: the step pod, handing the job over because the
// infrastructure removes it, must not take the replicas with it to the
// garbage collector. The run that re-attaches gives them its own owner.
// A job owned by its Workflow (or by nothing) needs nothing of it.
func (c *Controller) Disown(ctx context.Context) error {
	if owner := c.opts.Identity.Owner; owner == nil || owner.Kind != "Pod" {
		return nil
	}
	var objs []metav1.Object
	if pods, err := c.pods.Pods(c.opts.Identity.Namespace).List(labels.Everything()); err == nil {
		for _, p := range pods {
			objs = append(objs, p)
		}
	}
	for _, s := range c.listServices() {
		objs = append(objs, s)
	}
	for _, cm := range c.listConfigMaps() {
		objs = append(objs, cm)
	}
	for _, child := range c.jobWide {
		if s, ok := child.obj.(*corev1.Secret); ok {
			if uid := c.knownUID(s); uid != "" {
				objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: uid, OwnerReferences: s.OwnerReferences}})
			}
		}
	}
	errs := c.parallel(ctx, len(objs), func(i int) error { return c.setOwnerTo(ctx, objs[i], nil) })
	return joinErrors(errs)
}
