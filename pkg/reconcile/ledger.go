package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// ledgerJob is the restart ledger's key of whole-job restarts.
const ledgerJob = "job"

// ledgerEntry is one replica's last recreation that carried restarts
// (counted, or free after in-place restarts), or the job's last
// whole-job restart (counted or not: its attempt is what a run that
// re-attaches before the next attempt's pods exist goes on from).
type ledgerEntry struct {
	// UID is the instance the recreation replaces: while it is still there,
	// its delete never landed and the recreation did not happen.
	UID types.UID `json:"uid,omitempty"`
	// Restarts is the replica's restarts once replaced (what its next pod's
	// restarts annotation says), or the job's counted whole-job restarts.
	Restarts int32 `json:"restarts"`
	// Attempt is the job attempt a counted whole-job restart starts.
	Attempt int `json:"attempt,omitempty"`
}

// restartLedger is written ahead of every counted delete (and of a free
// one whose instance restarted in place), on the job's first Service, so
// that the count survives a step that dies before the replacement (which
// carries it in its annotations) is created.
type restartLedger map[string]ledgerEntry

// ledgerService names the Service that carries the ledger ("" when the job
// has none).
func (c *Controller) ledgerService() string {
	if len(c.opts.Desired.Services) == 0 {
		return ""
	}
	return c.opts.Desired.Services[0].Name
}

// recordCounted writes entries into the ledger before the deletes they
// count are sent; an error leaves everything as it was.
func (c *Controller) recordCounted(ctx context.Context, entries map[string]ledgerEntry) error {
	name := c.ledgerService()
	if name == "" || len(entries) == 0 {
		return nil
	}
	next := restartLedger{}
	for k, e := range c.ledger {
		next[k] = e
	}
	for k, e := range entries {
		next[k] = e
	}
	value, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := c.annotateLedgerService(ctx, v1alpha1.AnnotationRestartLedger, string(value)); err != nil {
		return fmt.Errorf("recording the job's restarts on service %s: %w", name, err)
	}
	c.ledger = next
	return nil
}

// annotateLedgerService sets one annotation of the ledger's Service. A
// Service removed from outside is no error: it is created again, and what
// it records counts from the next write.
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
		return nil
	}
	return err
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
		return nil
	}
	var l restartLedger
	if json.Unmarshal([]byte(svc.Annotations[v1alpha1.AnnotationRestartLedger]), &l) != nil {
		return nil
	}
	return l
}

// applyLedger continues the counts of an earlier run from its ledger:
// a replica whose counted recreation landed (the instance it replaced is
// gone) keeps at least the restarts recorded, and so does the job for its
// whole-job restarts. Called by adopt with the controller's mutex held; it
// returns the restarts it added.
func (c *Controller) applyLedger(l restartLedger) int32 {
	c.ledger = l
	var added int32
	if e, ok := l[ledgerJob]; ok && e.Restarts > c.jobRestarts {
		added += e.Restarts - c.jobRestarts
		c.jobRestarts = e.Restarts
	}
	for _, id := range c.order {
		st := c.replicas[id]
		e, ok := l[st.name]
		if !ok || (e.UID != "" && e.UID == st.uid && st.stage == stageObserved) {
			continue // the instance is still there: its delete never landed
		}
		if have := st.restartsSoFar(); e.Restarts > have {
			added += e.Restarts - have
			st.recreations += e.Restarts - have
		}
	}
	return added
}
