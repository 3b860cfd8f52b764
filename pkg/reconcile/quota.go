package reconcile

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trainstep/trainstep/pkg/apierr"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// quotaWait is how the job stands with its namespace's ResourceQuotas:
// since when creates have been refused, and the API server's words for the
// last refusal. Guarded by the controller's mutex.
type quotaWait struct {
	since time.Time
	// refusal is the quota's message ("" when nothing is refused), e.g.
	// "exceeded quota: team-a, requested: pods=1, used: pods=3, limited: pods=3".
	refusal string
	// tries counts passes in a row with a refusal: the retry backs off.
	tries int
}

// quotaRetryMin and quotaRetryMax bound how often refused creates are
// tried again, as the Job controller backs off its FailedCreate retries.
const (
	quotaRetryMin = time.Second
	quotaRetryMax = 10 * time.Second
)

// quotaRefusals takes the ResourceQuota refusals out of one creation pass's
// errors (they are waited on, not failures), records them with a
// FailedCreate Warning event, and returns how many there were. A pass
// without a refusal ends the wait.
func (c *Controller) quotaRefusals(errs []error) int {
	refused, first := 0, ""
	for i, err := range errs {
		if apierr.IsQuotaExceeded(err) {
			if refused == 0 {
				first = quotaMessage(err)
			}
			refused++
			errs[i] = nil
		}
	}
	c.mu.Lock()
	q := &c.quota
	changed := first != q.refusal
	switch {
	case refused == 0:
		q.since, q.refusal, q.tries = time.Time{}, "", 0
	case q.since.IsZero():
		q.since = c.opts.Clock.Now()
		fallthrough
	default:
		q.refusal = first
		q.tries++
	}
	c.mu.Unlock()
	if refused > 0 && changed {
		c.event(corev1.EventTypeWarning, EventFailedCreate, "waiting for quota: %d objects refused: %s", refused, first)
		c.opts.Logger.Warn("a ResourceQuota refuses the job's objects; waiting for room", zap.Int("refused", refused), zap.String("quota", first))
	}
	return refused
}

// quotaMessage is the ResourceQuota's own words, without the API server's
// "pods "x" is forbidden: " prefix.
func quotaMessage(err error) string {
	msg := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		msg = status.Status().Message
	}
	if _, after, found := strings.Cut(msg, "forbidden: "); found {
		return after
	}
	return msg
}

// quotaRecheck is when to try refused creates again (0 when none are).
func (c *Controller) quotaRecheck() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.quota.refusal == "" {
		return 0
	}
	wait := min(quotaRetryMin<<min(c.quota.tries-1, 4), quotaRetryMax)
	if p := c.opts.Timeouts.Pending; p > 0 {
		// Look again no later than when the wait runs out.
		wait = min(wait, max(p-c.opts.Clock.Since(c.quota.since), time.Millisecond))
	}
	return wait
}

// quotaTimedOut ends the run Transient once a quota has refused the job's
// objects for longer than the pending timeout: an Argo retry of the step
// tries later, and re-attaches to what exists.
func (c *Controller) quotaTimedOut() error {
	c.mu.Lock()
	q := c.quota
	c.mu.Unlock()
	if q.refusal == "" || c.opts.Timeouts.Pending <= 0 {
		return nil
	}
	if e, ok := policy.ElasticOf(&c.view); ok && e.Running >= e.Min {
		// Elastic workers waiting for room never end a job that trains
		// with enough of them: it grows once the quota has room.
		return nil
	}
	waited := c.opts.Clock.Since(q.since)
	if waited < c.opts.Timeouts.Pending {
		return nil
	}
	return result.Transient(result.ReasonQuotaExceeded,
		fmt.Errorf("a ResourceQuota refused the job's objects for %s (--pending-timeout %s): %s", waited.Round(time.Second), c.opts.Timeouts.Pending, q.refusal))
}

// quotaNotNeeded ends the wait on a quota when nothing is left to create:
// a refused object is no longer wanted (an elastic slot above the target).
func (c *Controller) quotaNotNeeded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.quota.refusal != "" {
		c.opts.Logger.Info("nothing waits for quota any more", zap.String("quota", c.quota.refusal))
		c.quota = quotaWait{}
	}
}
