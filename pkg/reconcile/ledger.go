package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
)

// restartLedger is written ahead of every counted delete (and of a free
// one whose instance restarted in place, and of every whole-job restart),
// on the job's first Service, so that the count survives a step that dies
// before the replacement (which carries it in its annotations) is created.
// It holds one entry per replica slot, not per instance: a job of the most
// replicas a job may have, every one of them restarted, stays below the
// API server's 256 KiB for an object's annotations. An entry stays when a
// replacement carries its restarts too: that replacement may go without
// trace (a pod-GC disruption while no step runs) before another is made,
// and the entry is then all that holds the count. Entries only ever grow,
// and a run takes the larger of an entry and what a pod carries.
type restartLedger struct {
	// Job is the job's last whole-job restart (nil before any).
	Job *jobLedgerEntry `json:"job,omitempty"`
	// Replicas holds, by slot ("<type>/<index>", the type lower case), the
	// restarts the replica's next instance carries.
	Replicas map[string]ledgerEntry `json:"replicas,omitempty"`
}

// jobLedgerEntry is the job's last whole-job restart, counted or not: its
// attempt is what a run that re-attaches before the next attempt's pods
// exist goes on from.
type jobLedgerEntry struct {
	// Attempt is the job attempt the restart starts.
	Attempt int `json:"attempt"`
	// Restarts is the job's counted whole-job restarts.
	Restarts int32 `json:"restarts"`
}

// ledgerEntry is one replica's last recreation that carried restarts
// (counted, or free after in-place restarts, or a whole-job restart that
// removed an instance that had restarted in place). It is written as
// [restarts, attempt, job attempt].
type ledgerEntry struct {
	// Restarts is the replica's restarts once replaced: what its next
	// pod's restarts annotation says.
	Restarts int32
	// Attempt and JobAttempt are the labels of the instance the entry
	// replaces: while that instance is there, its delete never landed and
	// the recreation did not happen.
	Attempt, JobAttempt int
}

// MarshalJSON writes the entry as three numbers.
func (e ledgerEntry) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("[%d,%d,%d]", e.Restarts, e.Attempt, e.JobAttempt)), nil
}

// UnmarshalJSON reads the entry MarshalJSON writes.
func (e *ledgerEntry) UnmarshalJSON(b []byte) error {
	var v [3]int64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	e.Restarts, e.Attempt, e.JobAttempt = int32(v[0]), int(v[1]), int(v[2])
	return nil
}

// job returns the whole-job restart on record.
func (l restartLedger) job() (jobLedgerEntry, bool) {
	if l.Job == nil {
		return jobLedgerEntry{}, false
	}
	return *l.Job, true
}

// replaces reports whether e was written for the instance st holds now.
func (e ledgerEntry) replaces(st *replicaState) bool {
	return st.pod != nil && st.attempt == e.Attempt && jobAttemptOf(st.pod) == e.JobAttempt
}

// ledgerSlot is a replica's key in the ledger.
func ledgerSlot(id policy.ReplicaID) string {
	return strings.ToLower(string(id.Type)) + "/" + strconv.Itoa(id.Index)
}

// errLedgerGone says the ledger's Service is not there: the deletes it
// would count wait until it is created again, with the ledger in it.
var errLedgerGone = errors.New("the Service that carries the job's restart ledger is gone; it is created again, with the ledger, before any restart goes on")

// ledgerService names the Service that carries the ledger ("" when the job
// has none).
func (c *Controller) ledgerService() string {
	if len(c.opts.Desired.Services) == 0 {
		return ""
	}
	return c.opts.Desired.Services[0].Name
}

// replicaEntry is the ledger entry of replacing st's current instance,
// whose replacement carries restarts. Called with the controller's mutex held.
func (c *Controller) replicaEntry(st *replicaState, restarts int32) ledgerEntry {
	e := ledgerEntry{Restarts: restarts, Attempt: st.attempt, JobAttempt: c.jobAttempt}
	if st.pod != nil && st.pod.UID == st.uid {
		e.JobAttempt = jobAttemptOf(st.pod)
	}
	return e
}

// recordCounted writes the job's entry (when not nil) and the replicas'
// entries into the ledger before the deletes they count are sent; an error
// leaves everything as it was, and no delete may go out.
func (c *Controller) recordCounted(ctx context.Context, job *jobLedgerEntry, entries map[policy.ReplicaID]ledgerEntry) error {
	name := c.ledgerService()
	if name == "" || (job == nil && len(entries) == 0) {
		return nil
	}
	next := c.nextLedger(job, entries)
	value, err := json.Marshal(next)
	if err != nil {
		return err
	}
	err = c.annotateLedgerService(ctx, v1alpha1.AnnotationRestartLedger, string(value))
	if errors.Is(err, errLedgerGone) {
		err = c.recreateLedgerService(ctx, next)
	}
	if err != nil {
		return fmt.Errorf("recording the job's restarts on service %s: %w", name, err)
	}
	c.ledger = next
	return nil
}

// recreateLedgerService creates the ledger's Service again, removed from
// outside, carrying next: what it records is where the next step reads it
// before any delete it counts goes out. One created meanwhile (by a sync's
// creates) is an error: the next write patches it.
func (c *Controller) recreateLedgerService(ctx context.Context, next restartLedger) error {
	svc := c.opts.Desired.Services[0]
	obj := c.withRecords(svc, next)
	var uid types.UID
	err := apierr.Retry(ctx, func() (err error) {
		uid, err = createObject(ctx, c.opts.Core, nil, obj)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: creating it again: %w", errLedgerGone, err)
	}
	c.markCreated(svc, uid)
	c.opts.Logger.Info("the Service that carries the restart ledger was removed from outside; created it again with the ledger", zap.String("service", svc.Name))
	return nil
}

// nextLedger is the ledger with job and entries written in, for the
// replica slots the job has now.
func (c *Controller) nextLedger(job *jobLedgerEntry, entries map[policy.ReplicaID]ledgerEntry) restartLedger {
	next := restartLedger{Job: c.ledger.Job, Replicas: map[string]ledgerEntry{}}
	if job != nil {
		next.Job = job
	}
	c.mu.Lock()
	for _, id := range c.order {
		slot := ledgerSlot(id)
		if e, ok := entries[id]; ok {
			next.Replicas[slot] = e
		} else if e, ok := c.ledger.Replicas[slot]; ok {
			next.Replicas[slot] = e
		}
	}
	c.mu.Unlock()
	return next
}

// annotateLedgerService sets one annotation of the ledger's Service. A
// Service removed from outside is an error (errLedgerGone): what it would
// record would be lost with it; it is created again, with the records this
// run holds (withRecords), by the next sync.
func (c *Controller) annotateLedgerService(ctx context.Context, key, value string) error {
	name := c.ledgerService()
	if name == "" {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	err = apierr.Retry(ctx, func() error {
		_, err := c.opts.Core.Services(c.opts.Identity.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return errLedgerGone
	}
	return err
}

// withRecords returns obj, or, when it is the ledger's Service, a copy
// that carries ledger and the worker target this run holds: a Service
// created again after it was removed from outside keeps them.
func (c *Controller) withRecords(obj runtime.Object, ledger restartLedger) runtime.Object {
	svc, ok := obj.(*corev1.Service)
	if !ok || svc.Name != c.ledgerService() {
		return obj
	}
	annotations := map[string]string{}
	if ledger.Job != nil || len(ledger.Replicas) > 0 {
		if value, err := json.Marshal(ledger); err == nil {
			annotations[v1alpha1.AnnotationRestartLedger] = string(value)
		}
	}
	if c.scaler != nil {
		annotations[v1alpha1.AnnotationWorkerTarget] = strconv.Itoa(c.WorkerTarget())
	}
	if len(annotations) == 0 {
		return obj
	}
	svc = svc.DeepCopy()
	svc.Annotations = maps.Clone(svc.Annotations)
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	maps.Copy(svc.Annotations, annotations)
	return svc
}

// cachedLedgerService is the ledger's Service as the cache holds it (nil
// when the job has none, or it is not there).
func (c *Controller) cachedLedgerService() *corev1.Service {
	name := c.ledgerService()
	if name == "" {
		return nil
	}
	svc, err := c.services.Services(c.opts.Identity.Namespace).Get(name)
	if err != nil {
		return nil
	}
	return svc
}

// readLedger reads the ledger an earlier run left, from the cache.
func (c *Controller) readLedger() restartLedger {
	svc := c.cachedLedgerService()
	if svc == nil {
		return restartLedger{}
	}
	var l restartLedger
	if json.Unmarshal([]byte(svc.Annotations[v1alpha1.AnnotationRestartLedger]), &l) != nil {
		return restartLedger{}
	}
	return l
}

// applyLedger continues the counts of an earlier run from its ledger:
// a replica whose recreation landed (the instance it replaced is gone)
// keeps at least the restarts recorded, and so does the job for its
// whole-job restarts. Called by adopt with the controller's mutex held; it
// returns the restarts it added.
func (c *Controller) applyLedger(l restartLedger) int32 {
	c.ledger = l
	var added int32
	if e, ok := l.job(); ok && e.Restarts > c.jobRestarts {
		added += e.Restarts - c.jobRestarts
		c.jobRestarts = e.Restarts
	}
	for _, id := range c.order {
		st := c.replicas[id]
		e, ok := l.Replicas[ledgerSlot(id)]
		if !ok || (st.stage == stageObserved && e.replaces(st)) {
			continue // the instance is still there: its delete never landed
		}
		if have := st.restartsSoFar(); e.Restarts > have {
			added += e.Restarts - have
			st.recreations += e.Restarts - have
		}
	}
	return added
}

// recordInPlaceRestarts writes into the ledger the counted in-place
// restarts of each replica's current instance that it does not hold yet:
// they live in the pod's status only, and a pod removed while no step
// watches (evicted, its node gone) would take them with it.
func (c *Controller) recordInPlaceRestarts(ctx context.Context) error {
	entries := map[policy.ReplicaID]ledgerEntry{}
	c.mu.Lock()
	for _, id := range c.order {
		st := c.replicas[id]
		if st.stage != stageObserved || st.last.Restarts == 0 {
			continue
		}
		want := st.restartsSoFar() + st.last.Restarts
		if e, ok := c.ledger.Replicas[ledgerSlot(id)]; ok && e.Restarts >= want && e.replaces(st) {
			continue
		}
		entries[id] = c.replicaEntry(st, want)
	}
	c.mu.Unlock()
	return c.recordCounted(ctx, nil, entries)
}
