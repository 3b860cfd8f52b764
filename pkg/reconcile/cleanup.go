package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
)

// Cleanup applies the end-of-job deletions: cleanPodPolicy when the job
// ended by itself, everything when the step was terminated or the run
// failed. Each instance is deleted by the UID this run knows (from its
// creates and its caches), never by name alone; transient errors are
// retried until ctx ends, and one failed delete does not stop the others.
// With waitGone it then waits until the caches saw the deletions and ends,
// always, with a live List by the job's label: objects the caches never
// held (a create whose answer was lost) are deleted from that List, by UID.
// It returns the objects that List still shows when ctx ends; when no List
// got through, the objects the caches still hold and an error saying so.
// The caller must hold the job's Lease: whatever carries the job's label is
// then this run's. Call it after Run returned (or instead of Run, when the
// run was stopped before it), on a context the termination signal does not
// cancel.
func (c *Controller) Cleanup(ctx context.Context, everything, waitGone bool) ([]string, error) {
	c.view = c.observe()
	plan := policy.Cleanup(c.opts.Job.Spec.RunPolicy.CleanPodPolicyOrDefault(), everything, c.view.Replicas)
	doomed := map[string]bool{}
	if everything {
		for _, id := range c.order {
			doomed[c.replicas[id].name] = true
		}
	}
	for _, id := range plan.Pods {
		doomed[c.replicas[id].name] = true
	}
	if len(doomed) == 0 && !plan.Shared {
		return nil, nil
	}
	// A replica's own Service goes with its pod; the ConfigMaps and the
	// Secrets go when no pod is left. The job-wide Service goes as soon as
	// any pod does, first: nothing dials a peer once the job has ended, and
	// while it stayed the endpoint controllers would rewrite its addresses
	// for every pod deleted.
	doomedServices := map[string]bool{}
	for _, svc := range c.opts.Desired.Services {
		if plan.Shared || doomed[svc.Name] || (len(doomed) > 0 && c.jobWideService(svc.Name)) {
			doomedServices[svc.Name] = true
		}
	}
	// Whatever carries the job's label is the job's, once every pod goes:
	// a pod of a replica type the spec no longer has, a Service never
	// rendered by this version.
	isDoomed := func(kind, name string) bool {
		if plan.Shared {
			return true
		}
		if kind == "pod" {
			return doomed[name]
		}
		return doomedServices[name]
	}
	deleted, forced := newDeletedSet(), newDeletedSet()
	first, deletes := c.knownInstanceDeletes(ctx, isDoomed, deleted, forced)
	var shared []sharedDelete
	switch {
	case plan.Shared:
		shared = c.sharedObjectDeletes(ctx)
	case gang.Kind(c.opts.Job) == v1alpha1.GangKueue && !keptRunning(c.view.Replicas, c.replicas, doomed):
		// The job is over and no pod it keeps runs: its Workload must not
		// hold the quota (Kueue does not always end a group some of whose
		// running pods were deleted while others had finished).
		shared = []sharedDelete{{"the Kueue Workload", retriedDelete(ctx, "the Kueue Workload", func() error { return c.deleteKueueWorkload(ctx) })}}
	}
	// The job-wide Service's delete is answered before the pods' go out.
	err := errors.Join(c.deleteAll(ctx, first), c.deleteAll(ctx, deletes))
	n := len(first) + len(deletes) + len(shared)
	shared, sharedErr := c.sendShared(ctx, shared)
	err = errors.Join(err, sharedErr)
	c.opts.Logger.Info("cleaning up", zap.Int("deletes", n), zap.Bool("everything", everything), zap.Error(err))
	if !waitGone {
		return nil, err
	}
	if c.informersRunning() {
		// Leave the live List time of its own at the end.
		cacheCtx, cancel := context.WithCancel(ctx)
		if deadline, ok := ctx.Deadline(); ok {
			reserve := max(2*time.Second, time.Until(deadline)/5)
			cacheCtx, cancel = context.WithDeadline(ctx, deadline.Add(-reserve))
		}
		c.waitForCaches(cacheCtx, isDoomed, deleted, forced)
		cancel()
	}
	return c.confirmGone(ctx, isDoomed, deleted, forced, shared)
}

// sharedDelete is a delete of the teardown that no List confirms (a
// ConfigMap, a Secret, the NetworkPolicies, a PodGroup, Kueue's Workload):
// it is sent again, until it lands, for as long as the teardown waits.
type sharedDelete struct {
	what string
	do   func() error
}

// sendShared sends the deletes, in parallel, and returns those that failed
// with their errors.
func (c *Controller) sendShared(ctx context.Context, shared []sharedDelete) ([]sharedDelete, error) {
	errs := parallelize(ctx, c.opts.TeardownParallelism, len(shared), func(i int) error { return shared[i].do() })
	var failed []sharedDelete
	for i, err := range errs {
		if err != nil {
			failed = append(failed, shared[i])
		}
	}
	if err := joinErrors(errs); err != nil {
		return failed, fmt.Errorf("deleting the job's objects: %w", err)
	}
	return nil, nil
}

// deletedSet holds the UIDs whose delete the API server accepted, so that
// each is sent until it lands, and once.
type deletedSet struct {
	mu   sync.Mutex
	uids map[types.UID]bool
}

func newDeletedSet() *deletedSet { return &deletedSet{uids: map[types.UID]bool{}} }

func (d *deletedSet) has(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.uids[uid]
}

func (d *deletedSet) add(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.uids[uid] = true
}

// forceStranded returns the delete, with grace 0 and once, of a pod the
// teardown deleted whose kubelet will not finish it (stranded); nil for
// any other.
func (c *Controller) forceStranded(ctx context.Context, p *corev1.Pod, forced *deletedSet) func() error {
	var t v1alpha1.ReplicaType
	if st := c.byName[p.Name]; st != nil { // built once, never written: no lock
		t = st.id.Type
	}
	if forced.has(p.UID) || !c.stranded(t, p) {
		return nil
	}
	name, uid := p.Name, p.UID
	return func() error {
		if err := deletePodWith(ctx, c.opts.Core, c.opts.Identity.Namespace, name, uid, true); err != nil {
			return fmt.Errorf("deleting pod/%s, whose kubelet does not answer, with grace 0: %w", name, err)
		}
		forced.add(uid)
		return nil
	}
}

// deleteInstance deletes one pod or Service instance by its UID, retrying
// transient errors; NotFound and a UID conflict (that instance is gone)
// count as done. It records the UID once the delete landed.
func (c *Controller) deleteInstance(ctx context.Context, kind, name string, uid types.UID, deleted *deletedSet) func() error {
	return func() error {
		ns, core := c.opts.Identity.Namespace, c.opts.Core
		var err error
		if kind == "pod" {
			err = deletePodUID(ctx, core, ns, name, uid)
		} else {
			err = apierr.Retry(ctx, func() error {
				return core.Services(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			})
			if apierrors.IsConflict(err) {
				err = nil
			}
		}
		if err == nil || apierrors.IsNotFound(err) {
			deleted.add(uid)
			return nil
		}
		return fmt.Errorf("deleting %s/%s: %w", kind, name, err)
	}
}

// knownInstanceDeletes lists the deletes of the doomed pods and Services
// whose instances this run knows: the UID of each replica's current
// instance, and whatever the caches hold. The job-wide Service's are
// first, to be sent before the others.
func (c *Controller) knownInstanceDeletes(ctx context.Context, isDoomed func(kind, name string) bool, deleted, forced *deletedSet) (first, rest []func() error) {
	type instance struct {
		kind, name string
		uid        types.UID
	}
	seen := map[types.UID]bool{}
	var known []instance
	var deletes []func() error
	c.mu.Lock()
	for _, id := range c.order {
		if st := c.replicas[id]; st.uid != "" && isDoomed("pod", st.name) {
			known, seen[st.uid] = append(known, instance{"pod", st.name, st.uid}), true
		}
	}
	c.mu.Unlock()
	if c.cachesSynced.Load() {
		pods, _ := c.pods.Pods(c.opts.Identity.Namespace).List(labels.Everything())
		for _, p := range pods {
			if !isDoomed("pod", p.Name) {
				continue
			}
			if force := c.forceStranded(ctx, p, forced); force != nil {
				deletes, seen[p.UID] = append(deletes, force), true
			}
			if !seen[p.UID] {
				known, seen[p.UID] = append(known, instance{"pod", p.Name, p.UID}), true
			}
		}
		for _, s := range c.listServices() {
			switch {
			case !isDoomed("service", s.Name):
			case c.jobWideService(s.Name):
				first = append(first, c.deleteInstance(ctx, "service", s.Name, s.UID, deleted))
			default:
				known = append(known, instance{"service", s.Name, s.UID})
			}
		}
	}
	for _, k := range known {
		deletes = append(deletes, c.deleteInstance(ctx, k.kind, k.name, k.uid, deleted))
	}
	return first, deletes
}

// jobWideService reports whether the job's Service of that name is the
// job-wide one (PerJob, named after the job), not a replica's own.
func (c *Controller) jobWideService(name string) bool {
	return c.byName[name] == nil // built once, never written: no lock
}

// sharedObjectDeletes lists the deletes of the job-wide ConfigMaps,
// Secrets and PodGroup, each retried in place while its error is transient.
func (c *Controller) sharedObjectDeletes(ctx context.Context) []sharedDelete {
	ns, core := c.opts.Identity.Namespace, c.opts.Core
	retried := func(what string, del func() error) sharedDelete {
		return sharedDelete{what: what, do: retriedDelete(ctx, what, del)}
	}
	var deletes []sharedDelete
	if c.opts.Desired.PodGroup != nil {
		deletes = append(deletes, retried("the PodGroup", func() error { return c.deletePodGroup(ctx) }))
	}
	if len(c.opts.Desired.Guards()) > 0 {
		deletes = append(deletes, retried("the NetworkPolicies and the PodDisruptionBudget", func() error { return c.deleteGuards(ctx) }))
	}
	if gang.Kind(c.opts.Job) == v1alpha1.GangKueue {
		deletes = append(deletes, retried("the Kueue Workload", func() error { return c.deleteKueueWorkload(ctx) }))
	}
	// Each by the UID of the job's own instance: an object of that name
	// that is not the job's is never deleted.
	for _, cm := range c.opts.Desired.ConfigMaps {
		deletes = append(deletes, retried("configmap/"+cm.Name, ownedDelete(ctx, c, core.ConfigMaps(ns), cm.Name, c.knownUID(cm))))
	}
	for _, s := range c.opts.Desired.Secrets {
		deletes = append(deletes, retried("secret/"+s.Name, ownedDelete(ctx, c, core.Secrets(ns), s.Name, c.knownUID(s))))
	}
	return deletes
}

// deleteAll runs the teardown's deletes, TeardownParallelism at once, each
// to its end whatever the others do, and joins their errors.
func (c *Controller) deleteAll(ctx context.Context, deletes []func() error) error {
	errs := parallelize(ctx, c.opts.TeardownParallelism, len(deletes), func(i int) error { return deletes[i]() })
	if err := joinErrors(errs); err != nil {
		return fmt.Errorf("deleting the job's objects: %w", err)
	}
	return nil
}

// informersRunning reports whether the caches are synced and still fed: a
// run stopped during Start has stopped informers, whose caches would never
// see a deletion.
func (c *Controller) informersRunning() bool {
	return c.cachesSynced.Load() && c.informerCtx != nil && c.informerCtx.Err() == nil
}

// waitForCaches waits, without List requests, until the informers saw the
// doomed objects go. An instance whose delete has not landed yet (it
// failed, or its create was still in flight when the deletes went out) is
// deleted, by UID, each time it is looked at.
func (c *Controller) waitForCaches(ctx context.Context, isDoomed func(kind, name string) bool, deleted, forced *deletedSet) {
	ns := c.opts.Identity.Namespace
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		var again []func() error
		gone := true
		pods, _ := c.pods.Pods(ns).List(labels.Everything())
		for _, p := range pods {
			if !isDoomed("pod", p.Name) {
				continue
			}
			gone = false
			if p.DeletionTimestamp == nil && !deleted.has(p.UID) {
				again = append(again, c.deleteInstance(ctx, "pod", p.Name, p.UID, deleted))
			} else if force := c.forceStranded(ctx, p, forced); force != nil {
				again = append(again, force)
			}
		}
		for _, s := range c.listServices() {
			if !isDoomed("service", s.Name) {
				continue
			}
			gone = false
			if !deleted.has(s.UID) {
				again = append(again, c.deleteInstance(ctx, "service", s.Name, s.UID, deleted))
			}
		}
		if err := c.deleteAll(ctx, again); err != nil {
			c.opts.Logger.Warn("deleting the job's objects again", zap.Error(err))
		}
		if err := c.releaseKueueHoldsOf(ctx, pods, nil); err != nil {
			c.opts.Logger.Warn("releasing the job's deleted pods from Kueue", zap.Error(err))
		}
		return gone, nil
	})
}

// confirmGone lists the job's pods and Services on the API server itself
// until none of the doomed ones is left, deleting by UID whatever it finds
// not yet deleted. When ctx ends it returns what the last List showed; if
// no List got through, what the caches still hold, with the List's error.
func (c *Controller) confirmGone(ctx context.Context, isDoomed func(kind, name string) bool, deleted, forced *deletedSet, shared []sharedDelete) ([]string, error) {
	ns := c.opts.Identity.Namespace
	core := c.opts.Core
	selector := metav1.ListOptions{LabelSelector: render.JobSelector(c.opts.Identity).String()}
	var left []string
	listed := false
	var lastErr error
	poll := func(ctx context.Context) (bool, error) {
		pods, err := core.Pods(ns).List(ctx, selector)
		if err != nil {
			lastErr = fmt.Errorf("listing the job's pods: %w", err)
			return false, nil
		}
		svcs, err := core.Services(ns).List(ctx, selector)
		if err != nil {
			lastErr = fmt.Errorf("listing the job's services: %w", err)
			return false, nil
		}
		deletes, podsLeft, svcsListed := c.listedDeletes(ctx, pods.Items, svcs.Items, isDoomed, deleted, forced)
		var sharedErr error
		shared, sharedErr = c.sendShared(ctx, shared)
		lastErr = errors.Join(c.deleteAll(ctx, deletes), sharedErr)
		// Counted after this round's deletes: a Service whose delete landed is
		// gone (nothing holds it), and must not be reported as left when the
		// deadline ends the wait right after.
		listed, left = true, podsLeft
		for _, d := range shared {
			left = append(left, d.what)
		}
		for _, s := range svcsListed {
			if !deleted.has(s.UID) {
				left = append(left, "service/"+s.Name)
			}
		}
		listedPods := make([]*corev1.Pod, len(pods.Items))
		for i := range pods.Items {
			listedPods[i] = &pods.Items[i]
		}
		if err := c.releaseKueueHoldsOf(ctx, listedPods, nil); err != nil && lastErr == nil {
			lastErr = err
		}
		return len(left) == 0 && lastErr == nil, nil
	}
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, poll)
	if err == nil {
		return nil, nil
	}
	if !listed {
		left = c.cachedDoomed(isDoomed)
		for _, d := range shared {
			left = append(left, d.what)
		}
	}
	slices.Sort(left)
	if lastErr == nil {
		lastErr = err
	}
	if !listed {
		return left, fmt.Errorf("no List of the job's objects got through, so what is left is not known for sure: %w", lastErr)
	}
	return left, fmt.Errorf("waiting for the job's objects to go: %w", lastErr)
}

// listedDeletes plans a round of confirmGone from what a List showed: the
// deletes of the doomed pods and Services not yet deleted (forced for a pod
// stranded on a node that stopped answering), the doomed pods listed, and
// the doomed Services listed.
func (c *Controller) listedDeletes(ctx context.Context, pods []corev1.Pod, svcs []corev1.Service, isDoomed func(kind, name string) bool, deleted, forced *deletedSet) (deletes []func() error, podsLeft []string, svcsListed []corev1.Service) {
	for i := range pods {
		p := &pods[i]
		if !isDoomed("pod", p.Name) {
			continue
		}
		// A pod whose delete landed may still be terminating: it is left until a List stops showing it.
		podsLeft = append(podsLeft, "pod/"+p.Name)
		if p.DeletionTimestamp == nil && !deleted.has(p.UID) {
			deletes = append(deletes, c.deleteInstance(ctx, "pod", p.Name, p.UID, deleted))
		} else if force := c.forceStranded(ctx, p, forced); force != nil {
			deletes = append(deletes, force)
		}
	}
	for _, s := range svcs {
		if !isDoomed("service", s.Name) {
			continue
		}
		svcsListed = append(svcsListed, s)
		if !deleted.has(s.UID) {
			deletes = append(deletes, c.deleteInstance(ctx, "service", s.Name, s.UID, deleted))
		}
	}
	return deletes, podsLeft, svcsListed
}

// cachedDoomed names the doomed objects the caches still hold: the best
// account of what is left when the API server cannot be asked.
func (c *Controller) cachedDoomed(isDoomed func(kind, name string) bool) []string {
	var left []string
	if !c.cachesSynced.Load() {
		c.mu.Lock()
		for _, id := range c.order {
			if st := c.replicas[id]; st.uid != "" && isDoomed("pod", st.name) {
				left = append(left, "pod/"+st.name)
			}
		}
		c.mu.Unlock()
		return left
	}
	pods, _ := c.pods.Pods(c.opts.Identity.Namespace).List(labels.Everything())
	for _, p := range pods {
		if isDoomed("pod", p.Name) {
			left = append(left, "pod/"+p.Name)
		}
	}
	for _, s := range c.listServices() {
		if isDoomed("service", s.Name) {
			left = append(left, "service/"+s.Name)
		}
	}
	return left
}

// goneIfConflict reads a UID precondition's conflict as done: the instance
// deleted is gone, and the name belongs to another.
func goneIfConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// retriedDelete is a teardown delete, retried while its error is
// transient; NotFound is done.
func retriedDelete(ctx context.Context, what string, del func() error) func() error {
	return func() error {
		err := apierr.Retry(ctx, del)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", what, err)
		}
		return nil
	}
}

// keptRunning reports whether a replica the teardown keeps still runs.
func keptRunning(replicas []policy.Replica, states map[policy.ReplicaID]*replicaState, doomed map[string]bool) bool {
	for _, r := range replicas {
		if st := states[r.ReplicaID]; st != nil && !doomed[st.name] && r.Phase == policy.PhaseRunning {
			return true
		}
	}
	return false
}

// namedClient reads and deletes one kind of object by name.
type namedClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// ownedDelete deletes the job's instance of name by its UID. An instance
// this run does not know (uid "": its create's answer was lost, the
// teardown came before the cache saw it, or before a re-attach read and
// re-owned an earlier attempt's) is read back and deleted only when it is
// the job's: its name and identity labels (the run holds the Lease).
func ownedDelete[T metav1.Object](ctx context.Context, c *Controller, client namedClient[T], name string, uid types.UID) func() error {
	return func() error {
		if uid == "" {
			live, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil || !c.ofThisJob(live.GetLabels()) {
				return err
			}
			uid = live.GetUID()
		}
		return goneIfConflict(client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}))
	}
}
