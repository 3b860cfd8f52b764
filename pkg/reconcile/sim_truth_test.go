package reconcile

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// The schedule's ground truth: what each injected exit must cost, from what
// the world knows of it, whatever the controller saw. An exit the job's
// restart policy retries, of a replica that was not following a peer's end
// (in a job that restarts as a whole, the first end is the cause) nor
// stopped by a restart under way, costs one restart — in place or by a
// recreation, or, for a job that restarts as a whole, the job's restart. A
// disruption, a lost node or a peer broken by the cause costs nothing. The
// restarts a run reports must equal what its failures cost: no fewer (a
// lower bound) and no more. Some failures may or may not count, and the
// check says which and why: one that landed too close to the job's end
// for a decision, or whose cost the policy judges by timing the pods do not
// keep (an MPI launcher's restarts while no step watched, an elastic
// job's workers).

// truthFailure is one injected exit and what it costs.
type truthFailure struct {
	at   time.Time
	what string
	// pod is the instance that failed.
	pod types.UID
	// undecided says why it may or may not count ("" when it must).
	undecided string
	// unseen: no watch delivered it yet (no step ran, or the watches were
	// broken); a relist or a step's start shows it.
	unseen bool
	// shownAt is when a relist or a step's start showed an unseen failure:
	// no step can decide it before, so its time to the end counts from
	// the later of this and the exit.
	shownAt time.Time
	// gone: its pod, restarted in place, went with its restart count
	// before any step saw it, whatever else leaves it undecided.
	gone bool
}

// decidableFrom is the earliest time a step could have begun to decide f.
func (f truthFailure) decidableFrom() time.Time {
	if f.shownAt.After(f.at) {
		return f.shownAt
	}
	return f.at
}

// noteFailure records what an exit of pod with code, which just landed,
// costs. restarting says a whole-job restart was under way. One that a
// watch is to deliver is judged as seen; should the watch end before it
// delivers it (it breaks, or its step goes), it is judged again as one
// that landed unwatched (lostDeliveries).
func (r *simRun) noteFailure(pod *corev1.Pod, code int32, restarting bool) {
	if code == 0 {
		return
	}
	unwatched := r.w.ctrl == nil || r.w.watchBroken
	f, costs := r.judgeFailure(pod, code, restarting, unwatched)
	at := -1
	if costs {
		at = len(r.truth)
		r.truth = append(r.truth, f)
	}
	if unwatched {
		return
	}
	blind, blindCosts := r.judgeFailure(pod, code, restarting, true)
	r.inFlight = append(r.inFlight, inFlightFailure{pod: pod.UID, version: pod.ResourceVersion, at: at, unwatched: blind, costs: blindCosts})
}

// judgeFailure says what an exit of pod with code, landing now, costs, as
// a step that watches (or, unwatched, none) would see it; costs is false
// for one that costs nothing.
func (r *simRun) judgeFailure(pod *corev1.Pod, code int32, restarting, unwatched bool) (f truthFailure, costs bool) {
	w := r.w
	f = truthFailure{at: w.now(), what: fmt.Sprintf("%s exit %d at %s", pod.Name, code, w.now().Sub(simEpoch)), pod: pod.UID,
		unseen: unwatched}
	job := w.job
	rt := replicaTypeOf(job, pod)
	spec := job.Spec.ReplicaSpecs[rt]
	switch {
	case spec == nil:
		return f, false
	case restarting:
		return f, false // collateral: the restart under way is the cause
	case r.followsPeersEnd(pod, code) && !unwatched:
		return f, false // collateral: the peer's end is the cause
	case r.followsPeersEnd(pod, code):
		// The cause, a peer's end, may be gone without trace when a step
		// next looks: a rank that failed at a known time then comes first.
		f.undecided = "it followed a peer's end while no step watched, which may have gone without trace"
	case job.Spec.ElasticPolicy != nil:
		f.undecided = "an elastic job's worker: tolerated or replaced as the workers alive at the time decide"
	case r.permanent(pod, code):
		return f, false // not retried: the job fails (permanentExit)
	}
	if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		if action := policy.DecideRestart(spec, policy.Replica{Phase: policy.PhaseFailed, ExitCode: &code}); action != policy.Recreate {
			return f, false
		}
	}
	if unwatched && job.Spec.Framework == v1alpha1.FrameworkMPI && rt == v1alpha1.ReplicaTypeLauncher {
		f.undecided = "an MPI launcher's restart while no step watched: it is judged by when the run that failed last started"
	}
	if unwatched && r.restartBeingCarried() {
		f.undecided = "while no step watched and a whole-job restart was being carried out"
	}
	return f, true
}

// inFlightFailure is a failure that landed while a step watched, its
// event on its way to the informer: what it costs if that event is lost.
type inFlightFailure struct {
	// pod and version identify the event that carries the exit.
	pod     types.UID
	version string
	// at is its place in the truth (-1: as seen, it cost nothing).
	at int
	// unwatched is the failure judged as one no step watched; costs: it
	// may cost a restart so.
	unwatched truthFailure
	costs     bool
	// decided: a sync of a step holding the Lease read it, delivered, at a
	// moment the API server took writes (its count could be recorded);
	// removed is its pod, should it go before.
	decided bool
	removed *corev1.Pod
}

// lostDeliveries judges again, as unwatched, each failure whose event is
// still on its way as the watches end (they broke, or their step went):
// the informer never delivers it, and no step saw it land. It is called
// before the events on their way are dropped. Those delivered but not yet
// decided stay with their step (undecidedLost).
func (r *simRun) lostDeliveries() {
	pending := r.pendingPodEvents()
	var kept []inFlightFailure
	for _, l := range r.inFlight {
		switch {
		case pending[string(l.pod)+"@"+l.version]:
			r.w.logf("%s: its event was lost with the watch, undelivered", l.unwatched.what)
			r.judgeUnwatched(l)
		case !l.decided:
			kept = append(kept, l)
		}
	}
	r.inFlight = kept
}

// undecidedLost judges again, as unwatched, each failure whose event step
// s was delivered but never decided on: s, going for a retry (killed, or
// ended leaving the job), held no Lease or could not write from then on,
// so what it saw goes with it, and the next step finds the failure only
// as the pods keep it, like one that landed while no step watched.
func (r *simRun) undecidedLost(s *simStep) {
	for _, l := range r.inFlight {
		r.w.logf("%s: step %d went without deciding on it (no Lease, or no write taken)", l.unwatched.what, s.gen)
		r.judgeUnwatched(l)
		if l.removed != nil {
			r.goneUnwatched(l.removed) // it took the failure with it
		}
	}
	r.inFlight = nil
}

// decideDeliveries marks the failures delivered so far as decided by the
// sync about to run, when its step holds the Lease and the API server
// takes writes: that sync counts them and may record them.
func (r *simRun) decideDeliveries() {
	if r.w.writeFault("patch") != nil || r.w.outage() {
		return
	}
	pending := r.pendingPodEvents()
	for i := range r.inFlight {
		if l := &r.inFlight[i]; !pending[string(l.pod)+"@"+l.version] {
			l.decided = true
		}
	}
}

// pendingPodEvents holds the pod events on their way, by UID@version.
func (r *simRun) pendingPodEvents() map[string]bool {
	pending := map[string]bool{}
	for _, e := range r.w.inbox[podsGVR] {
		if m, ok := e.event.Object.(metav1.Object); ok {
			pending[string(m.GetUID())+"@"+m.GetResourceVersion()] = true
		}
	}
	return pending
}

// judgeUnwatched puts l's failure into the truth as one no step watched.
func (r *simRun) judgeUnwatched(l inFlightFailure) {
	// Whatever costs as seen costs as unseen too (or may).
	switch {
	case l.costs && l.at >= 0:
		r.truth[l.at] = l.unwatched
	case l.costs:
		r.truth = append(r.truth, l.unwatched)
	}
	if r.permanentExit != "" && r.permanentPod == l.pod {
		r.permanentUnseen = true // a permanent exit no step saw
	}
}

// restartBeingCarried reports whether a pod of the job is being deleted:
// an earlier step's restart the next one carries on.
func (r *simRun) restartBeingCarried() bool {
	for _, p := range r.w.jobPods() {
		if p.DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

// checkTruth checks the end's restarts against the failures that must
// count: for a failed end, what it charged (the restarts made and the
// retryable failures the last decision saw unspent).
func (r *simRun) checkTruth(end *simEnd) {
	switch {
	case r.abandoned, r.unreported, end.reason == result.ReasonInternalError, end.phase == string(result.PhaseInvalid):
		return // no step reported, or a panic ended the run wherever a failure's handling stood
	}
	got := end.restarts
	if end.phase == string(result.PhaseFailed) {
		got = end.charged
	}
	var must, may int32
	var undecided []string
	for _, f := range r.truth {
		switch {
		case !f.decidableFrom().Before(end.at.Add(-simSettle - simDecisionSlack)):
			may++
			undecided = append(undecided, f.what+" (too close to the end for a decision)")
		case r.lastDecided.Before(f.at.Add(simSettle)) && r.ledLast.Before(f.at.Add(simSettle)):
			// A step that holds the Lease syncs on every pod event: none
			// synced after this one settled because none held it since.
			may++
			undecided = append(undecided, f.what+" (no step held the Lease from when it settled to the end)")
		case f.at.Before(r.ledgerLostAt):
			// The ledger's Service was removed from outside, and the step
			// that held what it recorded died before creating it again.
			may++
			undecided = append(undecided, f.what+" (counted in a ledger whose Service, removed from outside, went with the step that could write it again)")
		case f.undecided != "":
			may++
			undecided = append(undecided, f.what+" ("+f.undecided+")")
		case f.unseen:
			may++
			undecided = append(undecided, f.what+" (no step saw it before the end)")
		default:
			must++
		}
	}
	if r.gcTaken > 0 {
		// Their deletes carry no DisruptionTarget: the step that watches
		// them go may count each as a replica's failure.
		may += r.gcTaken
		undecided = append(undecided, fmt.Sprintf("%d replicas the garbage collector deleted with the evicted step pod, their owner not cleared within its grace", r.gcTaken))
	}
	if limit := r.w.job.Spec.RunPolicy.BackoffLimit; limit != nil && end.reason == result.ReasonBackoffLimitExceeded {
		// What went past the limit ended the job: any of it charges.
		may += max(0, must-*limit-1)
		must = min(must, *limit+1)
	}
	if got < must || got > must+may {
		r.violate("reported %d restarts (charged %d); the schedule's failures must cost %d%s: %s", end.restarts, end.charged, must,
			mayNote(may, undecided), r.truthLine())
	}
}

func mayNote(may int32, why []string) string {
	if may == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more may (%s)", may, strings.Join(why, "; "))
}

// truthLine names the failures that landed.
func (r *simRun) truthLine() string {
	var parts []string
	for _, f := range r.truth {
		parts = append(parts, f.what)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// launcherJudgedAway reports whether the step starting now finds an MPI
// launcher that restarted in place since a step last watched (since), and
// a worker that ended or went meanwhile: the pods keep when the launcher's
// last run failed, not when a worker gone without trace went, so which came
// first — whether the launcher's restart was its own failure or mpirun's
// for the worker's end — is not known to any step, and orders that differ
// only in what the re-attach makes of it are explained by the script.
func (r *simRun) launcherJudgedAway(since time.Time) bool {
	w := r.w
	job := w.job
	if job.Spec.Framework != v1alpha1.FrameworkMPI || since.IsZero() {
		return false
	}
	launcher := w.livePod(replicaNames(job)[0])
	if launcher == nil || replicaTypeOf(job, launcher) != v1alpha1.ReplicaTypeLauncher {
		return false
	}
	restarted := false
	for _, cs := range launcher.Status.ContainerStatuses {
		if t := cs.LastTerminationState.Terminated; t != nil && !t.FinishedAt.Time.Before(since) {
			restarted = true
		}
	}
	if !restarted {
		return false
	}
	for _, name := range replicaNames(job)[1:] {
		p := w.livePod(name)
		if p == nil {
			return true
		}
		if at, _, ended := simEnded(p); ended && !at.Before(since) || !disruptedAt(p).IsZero() {
			return true
		}
	}
	return false
}

// removedUnwatched marks the failures of pod, removed while no watch
// delivered its state (no step ran, or the watches were broken), as ones
// no step could see: the pod took its in-place restarts with it.
func (r *simRun) removedUnwatched(pod *corev1.Pod) {
	if r.w.ctrl != nil && !r.w.watchBroken {
		for i := range r.inFlight {
			if r.inFlight[i].pod == pod.UID {
				r.inFlight[i].removed = pod
			}
		}
		return
	}
	r.goneUnwatched(pod)
}

// goneUnwatched marks the failures of pod, removed, as ones no step saw.
func (r *simRun) goneUnwatched(pod *corev1.Pod) {
	if r.permanentExit != "" && r.permanentUnseen && pod.UID == r.permanentPod {
		// Its pod took the exit with it: no step can know of it.
		r.w.logf("%s went with its pod before any step saw it", r.permanentExit)
		r.permanentExit = ""
	}
	if r.permanentExit != "" && r.permanentUnseen && r.permanentCollective && pod.UID != r.permanentPod &&
		pod.Labels[v1alpha1.LabelJobAttempt] == r.permanentAttempt && frameworks.RestartsWithJob(r.w.job, replicaTypeOf(r.w.job, pod)) {
		// A peer removed while no step watched reaches the next look as
		// gone with no end on record (a relist's tombstone carries what
		// the cache last held), beside a rank's error exit no step saw
		// either: the pods do not order them, and the policy takes the
		// loss for the cause of the exit (a free restart), as it may be.
		r.w.logf("%s and %s's removal, unseen, are not ordered by the pods: the exit may be the loss's collateral", r.permanentExit, pod.Name)
		r.permanentExit = ""
	}
	for i := range r.truth {
		f := &r.truth[i]
		switch {
		case f.pod != pod.UID:
		case f.undecided == "":
			f.undecided, f.gone = undecidedGoneUnseen, true
		case f.unseen:
			// Undecided for another reason already (an MPI launcher's
			// restart while no step watched), it is gone all the same:
			// no step can count it any more.
			r.w.logf("%s went with its pod before any step saw it", f.what)
			f.gone = true
		}
	}
}

// undecidedGoneUnseen: the failure's pod, restarted in place, went with its
// restart count before any step saw it.
const undecidedGoneUnseen = "its pod was removed before any step saw it"

// goneUnseen names the failures whose pod went before any step saw them.
func (r *simRun) goneUnseen() []string {
	var out []string
	for _, f := range r.truth {
		if f.gone {
			out = append(out, f.what)
		}
	}
	return out
}

// landedLate reports whether an exit or a disruption landed, or a relist or
// a step's start showed a failure no step saw land, within simSettle and
// simDecisionSlack of now: too close to the end for every order to decide
// it, as checkTruth judges it (decidableFrom).
func (r *simRun) landedLate() bool {
	now := r.w.now()
	if !r.lastLanded.IsZero() && now.Sub(r.lastLanded) < simSettle+simDecisionSlack {
		return true
	}
	for _, f := range r.truth {
		if !f.shownAt.IsZero() && !f.shownAt.Before(now.Add(-simSettle-simDecisionSlack)) {
			return true
		}
	}
	return false
}

// relistShows marks every failure so far as seen by a relist, each
// delivered to its step but not yet decided on: should the step go
// without deciding (no Lease, or no write taken), the next one finds it
// only as the pods keep it, and not at all once its pod is removed
// (undecidedLost), as for one a watch delivered.
func (r *simRun) relistShows() {
	listed := map[types.UID]string{}
	for _, p := range r.w.jobPods() {
		listed[p.UID] = p.ResourceVersion
	}
	for i, f := range r.truth {
		if version, ok := listed[f.pod]; ok && f.unseen {
			r.inFlight = append(r.inFlight, inFlightFailure{pod: f.pod, version: version, at: i, unwatched: f, costs: true})
		}
	}
	r.truthSeen()
}

// truthSeen marks every failure so far as seen: an informer listed the
// job's pods (a step started, or its informers relisted).
func (r *simRun) truthSeen() {
	r.permanentUnseen = false
	for i := range r.truth {
		if f := &r.truth[i]; f.unseen {
			f.unseen, f.shownAt = false, r.w.now()
		}
	}
}
