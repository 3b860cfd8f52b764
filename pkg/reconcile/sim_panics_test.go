package reconcile

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/result"
)

// An injected panic hits whichever step handles the next pod create or pod
// event, at whatever point that step's handling of the job stands: both are
// the delivery order's. The order comparison explains two differences by it,
// each naming what the panic hit in the trace.

// The explanations of a difference the injected panic makes.
const (
	explainedByPanicAway = "the injected panic hit a step without the Lease in one order, the deciding step in another"
	explainedByPanicCut  = "the injected panic cut short the handling of failures that had landed"
)

// notePanicCut records, as the injected panic fires, the failures that had
// landed and whose handling had not finished: their pod failed and not yet
// deleted. Whether a step counted them before the panic is the order's.
func (r *simRun) notePanicCut() {
	if r.over() {
		return
	}
	live := map[types.UID]*corev1.Pod{}
	for _, p := range r.w.jobPods() {
		live[p.UID] = p
	}
	r.panicCut = nil
	for _, f := range r.truth {
		if p := live[f.pod]; p != nil && p.Status.Phase == corev1.PodFailed && p.DeletionTimestamp == nil {
			r.panicCut = append(r.panicCut, f.what)
		}
	}
	if len(r.panicCut) > 0 {
		r.w.logf("the injected panic cuts short the handling of %s", strings.Join(r.panicCut, ", "))
	}
}

// notePanicAway records that the injected panic hit step s, which could not
// hold the Lease to tear down and ended Transient: its retry decides the job
// without the panic.
func (r *simRun) notePanicAway(s *simStep) {
	if !r.panicking {
		return
	}
	r.panicAway = fmt.Sprintf("step %d", s.gen)
	r.w.logf("the injected panic hit step %d, which did not hold the Lease; its retry goes on without it", s.gen)
}

// panicAwayExplains reports whether e's panic hit a step without the Lease
// while o's hit the step that ended the job (InternalError).
func panicAwayExplains(e, o simEnd) bool {
	return e.panicAway != "" && e.reason != result.ReasonInternalError && o.panicAway == "" && o.reason == result.ReasonInternalError
}

// panicCutExplains reports whether both ends are the injected panic's and
// the one that counted fewer restarts had at least as many failures still
// unhandled when the panic fired.
func panicCutExplains(e, o simEnd) bool {
	if e.reason != result.ReasonInternalError || o.reason != result.ReasonInternalError || e.phase != o.phase {
		return false
	}
	lo, hi := e, o
	if lo.restarts > hi.restarts {
		lo, hi = hi, lo
	}
	return int(hi.restarts-lo.restarts) <= len(lo.panicCut)
}
