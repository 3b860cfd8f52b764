package reconcile

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// The simulation drives the real controller through drawn jobs and fault
// scripts in the simulated world (sim_world_test.go) and checks invariants
// after every step. Each schedule is one seed: the seed draws the job and
// the fault script; the script then runs under several delivery orders,
// which must all end alike.
//
//	make soak SCHEDULES=100000                                        (many schedules)
//	go test ./pkg/reconcile -run 'TestSimulation$' -seed N -v          (replay one, with its trace)
//	go test ./pkg/reconcile -run 'TestSimulationRegressions/NAME' -v -args -trace
var (
	simSchedules = flag.Int("schedules", 0, "how many schedules TestSimulation runs (default 2000, 200 under -race)")
	simSeed      = flag.Uint64("seed", 0, "run only this schedule of TestSimulation, with its trace")
	simOrders    = flag.Int("orders", 3, "delivery orders each fault script runs under")
	simTrace     = flag.Bool("trace", false, "log the world's trace of TestSimulationRegressions")
)

// fault is one thing that goes wrong at a virtual time.
type fault struct {
	at   time.Duration
	kind faultKind
	// replica names the replica an exit or a disruption hits (its current
	// instance once it runs).
	replica string
	code    int32
	// disruption: "preemption", "eviction" or "podgc".
	disruption string
	node       int
	// lasts is how long an outage, a full quota or a node's silence lasts;
	// for a killed step, how long until its successor starts.
	lasts time.Duration
	// deleted: the silent node's Node object is deleted (the pod garbage
	// collector's condition-then-forced-delete).
	deleted bool
	applied bool
	// peers are the delays after which the other ranks of a job that
	// restarts as a whole exit 1 (their collective broke).
	peers map[string]time.Duration
	// onLanding, for a disruption, runs as it lands (an injected panic's).
	onLanding func()
}

type faultKind int

const (
	faultExit faultKind = iota
	faultDisruption
	faultNodeDown
	faultAPI
	faultQuota
	faultKillStep
	// faultKillDuringExit kills the step, makes a replica exit while no
	// step runs, and starts the successor: the re-attach must judge it.
	faultKillDuringExit
	// faultPanic makes trainstep panic: in the next pod create (a
	// disruption of replica asks for one), or in the informer's handler of
	// the next pod event. The run must end Failed InternalError, torn down.
	faultPanic
	// faultLoad moves the workers' cpu use to code percent of their
	// request: an elastic job's metrics move its worker target.
	faultLoad
	// The control plane's faults and the outside world's (sim_faults_test.go).
	faultAPIRestart
	faultCompact
	faultThrottle
	faultRemove
	faultStop
	// faultDrainStep drains the step's own node: SIGTERM, its pod marked
	// with a DisruptionTarget; the step hands the job over to its retry.
	faultDrainStep
)

func (f fault) String() string {
	at := fmt.Sprintf("t=%s ", f.at)
	switch f.kind {
	case faultExit:
		return at + fmt.Sprintf("%s exits %d", f.replica, f.code)
	case faultDisruption:
		return at + fmt.Sprintf("%s disrupted by %s", f.replica, f.disruption)
	case faultNodeDown:
		return at + fmt.Sprintf("node-%d stops answering for %s (node deleted: %v)", f.node, f.lasts, f.deleted)
	case faultAPI:
		applied := ""
		if f.applied {
			applied = ", each write landing before its answer is lost"
		}
		return at + fmt.Sprintf("writes fail %d for %s%s", f.code, f.lasts, applied)
	case faultQuota:
		return at + fmt.Sprintf("the quota refuses pods for %s", f.lasts)
	case faultKillStep:
		return at + fmt.Sprintf("the step is killed; its successor starts after %s", f.lasts)
	case faultKillDuringExit:
		return at + fmt.Sprintf("the step is killed, %s exits %d while it is away, its successor starts after %s", f.replica, f.code, f.lasts)
	case faultPanic:
		return at + fmt.Sprintf("trainstep panics in %s (%s is disrupted)", f.disruption, f.replica)
	case faultLoad:
		return at + fmt.Sprintf("the workers' cpu use moves to %d%% of their request", f.code)
	case faultAPIRestart:
		return at + fmt.Sprintf("kube-apiserver restarts: every request refused for %s, every watch broken", f.lasts)
	case faultCompact:
		return at + "etcd is compacted: every watch ends 410 Gone and relists"
	case faultThrottle:
		return at + fmt.Sprintf("API Priority and Fairness answers every request 429 for %s", f.lasts)
	case faultRemove:
		return at + fmt.Sprintf("%s is deleted from outside", f.replica)
	case faultStop:
		return at + "the workflow is stopped (SIGTERM to the step)"
	case faultDrainStep:
		return at + "the step's own node is drained (SIGTERM to the step, its pod a DisruptionTarget)"
	}
	return at + "?"
}

// schedule is one drawn job with its fault script.
type schedule struct {
	seed   uint64
	name   string
	job    *v1alpha1.TrainJob
	faults []fault
	nodes  int
	// counted is how many injected failures may each cost one counted restart.
	counted int
	// regression names a hand-written schedule (TestSimulationRegressions).
	regression string
	// room is when the cluster or Kueue's ClusterQueue has room for a gang
	// whose scheduler holds it (scheduler-plugins, Kueue).
	room time.Duration
	// load is the workers' cpu use at the start, in percent of their
	// request (elasticPolicy.metrics).
	load int64
}

// replay is the command that runs s again, with its trace.
func (s schedule) replay() string {
	if s.regression != "" {
		return fmt.Sprintf("go test ./pkg/reconcile -run 'TestSimulationRegressions/%s$' -v -args -trace", s.regression)
	}
	return fmt.Sprintf("go test ./pkg/reconcile -run 'TestSimulation$' -seed %d -v", s.seed)
}

func (s schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule %d (%s): %d nodes, backoffLimit %s, cleanPodPolicy %s", s.seed, s.name, s.nodes,
		ptrString(s.job.Spec.RunPolicy.BackoffLimit), s.job.Spec.RunPolicy.CleanPodPolicyOrDefault())
	if s.room > 0 {
		fmt.Fprintf(&b, ", room for the gang after %s", s.room)
	}
	if frameworks.ScalesOnMetrics(s.job) {
		fmt.Fprintf(&b, ", workers at %d%% of their cpu request", s.load)
	}
	b.WriteString("\n")
	for _, f := range s.faults {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}

func ptrString(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

// simTimeouts are the run's bounds in the simulation, as the executor's
// flags give them.
var simTimeouts = policy.Timeouts{Stuck: 5 * time.Minute, Pending: 2 * time.Minute, NodeLost: 40 * time.Second}

const (
	simAPITimeout = 90 * time.Second
	// simHorizon is how long after the last fault the job has to end: a
	// job still running then is wedged.
	simHorizon = 15 * time.Minute
	// simRetries is how often Argo retries a step that ended Transient
	// leaving its objects (the re-attach path).
	simRetries = 4
)

// drawSchedule draws a job and a fault script from seed.
func drawSchedule(seed uint64) schedule {
	r := rand.New(rand.NewPCG(seed, 0xfa17))
	s := schedule{seed: seed, nodes: 2 + r.IntN(2)}
	switch r.IntN(5) {
	case 0:
		s.name, s.job = "tf-exitcode", tfJob(v1alpha1.RestartPolicyExitCode)
	case 1:
		s.name, s.job = "tf-onfailure", tfJob(v1alpha1.RestartPolicyOnFailure)
	case 2:
		s.name, s.job = "ddp", ddpJob(v1alpha1.RestartPolicyExitCode)
	case 3:
		s.name, s.job = "ddp-never", ddpJob(v1alpha1.RestartPolicyNever)
	default:
		s.name, s.job = "elastic", elasticJob(3, 2, 4)
	}
	// MPI came later: a stream of its own takes a sixth of the schedules.
	if m := rand.New(rand.NewPCG(seed, 0x3b1)); m.IntN(6) == 0 {
		s.name, s.job = drawMPIJob(m)
	} else if k := m.IntN(8); k < 2 {
		// JAX (workers alone, restarted as a whole) and XGBoost (a master
		// and workers, each restarted alone) too.
		policy := simRestartPolicies[m.IntN(len(simRestartPolicies))]
		s.name, s.job = "jax-"+strings.ToLower(string(policy)), simpleJob("jx", v1alpha1.FrameworkJAX, policy, map[v1alpha1.ReplicaType]int32{v1alpha1.ReplicaTypeWorker: 3})
		if k == 1 {
			s.name, s.job = "xgboost-"+strings.ToLower(string(policy)), simpleJob("xg", v1alpha1.FrameworkXGBoost, policy,
				map[v1alpha1.ReplicaType]int32{v1alpha1.ReplicaTypeMaster: 1, v1alpha1.ReplicaTypeWorker: 2})
		}
	}
	s.job.Namespace = ns
	rp := &s.job.Spec.RunPolicy
	switch r.IntN(4) {
	case 0:
		rp.BackoffLimit = nil
	default:
		limit := int32(r.IntN(4))
		rp.BackoffLimit = &limit
	}
	if r.IntN(4) == 0 {
		deadline := int64(120 + r.IntN(300))
		rp.ActiveDeadlineSeconds = &deadline
	}
	if r.IntN(5) == 0 {
		// The built-in gang: pods created gated, ungated together.
		rp.SchedulingPolicy.Gang = v1alpha1.GangBuiltin
		s.name += "+gang"
	}
	policies := []v1alpha1.CleanPodPolicy{v1alpha1.CleanPodPolicyRunning, v1alpha1.CleanPodPolicyAll, v1alpha1.CleanPodPolicyNone}
	cp := policies[r.IntN(len(policies))]
	rp.CleanPodPolicy = &cp
	// The draws added later come from a stream of their own, so that the
	// schedules drawn before keep their jobs and scripts.
	x := rand.New(rand.NewPCG(seed, 0x6a9e))
	if s.job.Spec.ElasticPolicy != nil && x.IntN(2) == 0 {
		s.job = onMetrics(s.job, 60)
		s.name += "+metrics"
		s.load = []int64{30, 60, 150}[x.IntN(3)]
	}
	if rp.SchedulingPolicy.Gang != v1alpha1.GangBuiltin {
		switch x.IntN(6) {
		case 0:
			rp.SchedulingPolicy.Gang, rp.SchedulingPolicy.Queue = v1alpha1.GangKueue, "training"
			s.name += "+kueue"
		case 1:
			rp.SchedulingPolicy.Gang = v1alpha1.GangSchedulerPlugins
			s.name += "+podgroup"
		}
		if k := rp.SchedulingPolicy.Gang; k == v1alpha1.GangKueue || k == v1alpha1.GangSchedulerPlugins {
			// Room well before, or well after, the gang's and the pending
			// timeouts: which side of them is the script's.
			s.room = []time.Duration{0, 0, 40 * time.Second, 80 * time.Second, 450 * time.Second}[x.IntN(5)]
		}
	}

	if _, _, held := frameworks.HeldUntilReady(s.job); held {
		// What validation asks of a launcher that waits under a gang.
		switch sp := rp.SchedulingPolicy; sp.Gang {
		case v1alpha1.GangBuiltin, v1alpha1.GangKueue:
			s.job.Spec.LauncherCreationPolicy = v1alpha1.LauncherCreationAtStartup
			s.name = strings.Replace(s.name, "+wait", "", 1)
		case v1alpha1.GangSchedulerPlugins:
			sp.MinAvailable = s.job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Replicas
		}
	}

	replicas := replicaNames(s.job)
	n := r.IntN(6)
	at := 5 * time.Second
	for range n {
		// Faults stand apart by more than a restart takes, so that the
		// order in which their consequences arrive is all that varies.
		at += time.Duration(20+r.IntN(30)) * time.Second
		f := fault{at: at}
		switch k := r.IntN(100); {
		case k < 30:
			f.kind, f.replica = faultExit, replicas[r.IntN(len(replicas))]
			f.code = []int32{1, 137, 143, 3}[r.IntN(4)]
			s.counted++
		case k < 50:
			f.kind, f.replica = faultDisruption, replicas[r.IntN(len(replicas))]
			f.disruption = []string{"preemption", "eviction", "podgc"}[r.IntN(3)]
		case k < 62:
			f.kind, f.node = faultNodeDown, r.IntN(s.nodes)
			f.lasts = []time.Duration{5 * time.Second, 70 * time.Second, 10 * time.Minute}[r.IntN(3)]
			f.deleted = r.IntN(3) == 0
			at += f.lasts
		case k < 77:
			f.kind, f.lasts = faultAPI, time.Duration(1+r.IntN(60))*time.Second
			f.code = []int32{500, 503, 429, 409, 504}[r.IntN(5)]
			f.applied = f.code != 409 && r.IntN(3) == 0
		case k < 87:
			f.kind, f.lasts = faultQuota, time.Duration(5+r.IntN(200))*time.Second
			at += f.lasts
		case k < 91:
			f.kind, f.lasts = faultKillStep, time.Duration(1+r.IntN(30))*time.Second
		case k < 94:
			f.kind, f.replica = faultPanic, replicas[r.IntN(len(replicas))]
			f.disruption = []string{"a pod create", "a pod event's handler"}[r.IntN(2)]
		default:
			f.kind, f.lasts = faultKillDuringExit, time.Duration(4+r.IntN(30))*time.Second
			f.replica = replicas[r.IntN(len(replicas))]
			f.code = []int32{1, 137, 143, 3}[r.IntN(4)]
			s.counted++
		}
		if f.kind == faultExit || f.kind == faultDisruption || f.kind == faultKillDuringExit {
			f.peers = map[string]time.Duration{}
			for _, p := range replicas {
				if p != f.replica {
					f.peers[p] = time.Duration(300+r.IntN(2000)) * time.Millisecond
				}
			}
		}
		s.faults = append(s.faults, f)
	}
	s.faults = append(s.faults, drawControlPlaneFaults(seed, at)...)
	if frameworks.ScalesOnMetrics(s.job) {
		for range 1 + x.IntN(3) {
			f := fault{at: time.Duration(10+x.IntN(int(at/time.Second)+20)) * time.Second, kind: faultLoad}
			f.code = []int32{20, 60, 150, 250}[x.IntN(4)]
			s.faults = append(s.faults, f)
		}
	}
	slices.SortStableFunc(s.faults, func(a, b fault) int { return cmp.Compare(a.at, b.at) })
	return s
}

// simRestartPolicies are those the MPI, JAX and XGBoost draws give their workers.
var simRestartPolicies = []v1alpha1.RestartPolicy{v1alpha1.RestartPolicyNever, v1alpha1.RestartPolicyExitCode, v1alpha1.RestartPolicyOnFailure}

// drawMPIJob draws an MPI job as the controller sees it (mpiSimJob), the
// launcher created at once or once every worker is Ready.
func drawMPIJob(m *rand.Rand) (string, *v1alpha1.TrainJob) {
	creation := []v1alpha1.LauncherCreationPolicy{v1alpha1.LauncherCreationAtStartup, v1alpha1.LauncherCreationWaitForWorkersReady}[m.IntN(2)]
	workers := int32(2 + m.IntN(2))
	job := mpiSimJob(creation, workers, simRestartPolicies[m.IntN(len(simRestartPolicies))])
	name := "mpi-" + strings.ToLower(string(job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].RestartPolicy))
	if creation == v1alpha1.LauncherCreationWaitForWorkersReady {
		name += "+wait"
	}
	return name, job
}

// simpleJob is a job of framework with the given replicas, each type with
// restart policy policy, and the framework's other defaults.
func simpleJob(name string, framework v1alpha1.Framework, policy v1alpha1.RestartPolicy, replicas map[v1alpha1.ReplicaType]int32) *v1alpha1.TrainJob {
	job := &v1alpha1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.TrainJobSpec{Framework: framework, ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{}}}
	for rt, n := range replicas {
		job.Spec.ReplicaSpecs[rt] = &v1alpha1.ReplicaSpec{Replicas: &n, RestartPolicy: policy,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: string(framework), Image: "train:1"}}}}}
	}
	frameworks.SetDefaults(job)
	return job
}

// mpiSimJob is an MPI job with the defaults a user gets: the launcher
// retried in place (OnFailure), a failure restarting the workers, and the
// launcher with them.
func mpiSimJob(creation v1alpha1.LauncherCreationPolicy, workers int32, workerPolicy v1alpha1.RestartPolicy) *v1alpha1.TrainJob {
	job := mpiJob(creation)
	// mpiJob follows the launcher alone; the default restarts the job.
	job.Spec.RunPolicy.FailurePolicy = nil
	worker := job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker]
	worker.Replicas, worker.RestartPolicy = &workers, workerPolicy
	frameworks.SetDefaults(job)
	return job
}

// replicaNames are the pod names of the job's replicas.
func replicaNames(job *v1alpha1.TrainJob) []string {
	var out []string
	for _, id := range policy.Desired(job) {
		out = append(out, render.PodName(job.Name, id.Type, id.Index))
	}
	return out
}

// simEnd is how a schedule ended.
type simEnd struct {
	phase, reason string
	restarts      int32
	// charged is the restarts and the retryable failures the last decision
	// saw and did not spend, the job failing.
	charged    int32
	reattached int
	// at is when the job ended, deadline when its activeDeadlineSeconds
	// ran out (zero without one).
	at, deadline time.Time
	// resumed is when the last step took the Lease (back), or started.
	resumed time.Time
	// launcherAway: a re-attach could not order an MPI launcher's restart
	// and a worker's end (launcherJudgedAway).
	launcherAway bool
	// lateFault: an exit or a disruption landed, or a relist or a step's
	// start showed one no step saw land, within simSettle and
	// simDecisionSlack of the end (landedLate).
	lateFault bool
	// landed names the script's exits and disruptions that took effect
	// before the end: one whose replica never ran again, or that came
	// after the end, changed nothing.
	landed string
	// targets lists the worker targets an elastic job's metrics moved it
	// to before the end, in turn.
	targets []int
	// panicAway names the step without the Lease that the injected panic
	// hit; panicCut, the failures whose handling it cut short
	// (sim_panics_test.go).
	panicAway string
	panicCut  []string
	// goneUnseen names the failures whose pod went, with its in-place
	// restarts, before any step saw them.
	goneUnseen []string
}

// compare compares two ends of one fault script, strictly on phase,
// reason and counted restarts. A difference passes only when the script
// itself explains it, and compare names the explanation ("" for a strict
// match); ok is false for a difference nothing explains.
//
//   - other faults took effect: the order decided whether a replica ran
//     again in time for an exit or a disruption, or whether it came after
//     the end (nothing to compare);
//   - the metrics moved the worker target along another path: their
//     evaluation counts the workers it has seen running, as the HPA's
//     does, so when it came decides how many slots a failure leaves;
//   - the deadline raced the job's end: a failure at the deadline and
//     another end close to it are alike;
//   - two bounded waits passed together: the gang's timeout and the
//     pending timeout, Transient either way;
//   - a wait's bound passed while the step could not act (the API server
//     away, the Lease lost): the first looks after it raced what it waited
//     for;
//   - an MPI launcher's restart and a worker's end while no step watched:
//     the pods keep no order of the two, and a re-attach judges the
//     launcher's restart by the worker's trace, which a slower or faster
//     pod deletion leaves or takes;
//   - a fault landed too close to the end for every order to decide it:
//     an exit or a disruption within the policy's settle and a decision's
//     slack of an end that does not wait for it (the workflow stopped, the
//     deadline, a bound), or one no step saw land that a relist or a
//     step's start showed that late;
//   - the injected panic hit a step without the Lease in one order (it
//     ended Transient, the retry went on without it) and the deciding
//     step in another (InternalError);
//   - the injected panic cut short the handling of failures that had
//     landed: both orders end InternalError, the one that counted fewer
//     restarts with at least as many failures still unhandled;
//   - a failure no step saw went with its pod before the next step
//     looked in one order (a deletion that finished sooner), not in
//     another, which counted its in-place restart, whatever else left it
//     undecided;
//   - failures found at once charge as those seen one at a time: a step
//     that found several failures at once (it was away, or could not
//     write) ends the job with the retryable ones unspent; what they charge
//     is the same.
func (e simEnd) compare(o simEnd) (explanation string, ok bool) {
	if e.phase == o.phase && e.reason == o.reason && e.restarts == o.restarts {
		return "", true
	}
	switch {
	case e.landed != o.landed:
		return explainedByFaults, true
	case !slices.Equal(e.targets, o.targets):
		return explainedByTargets, true
	case (e.reason == result.ReasonDeadlineExceeded || o.reason == result.ReasonDeadlineExceeded) &&
		(e.phase == o.phase || o.near(e.deadline) || e.near(o.deadline)):
		return explainedByDeadline, true
	case e.boundedWait() && o.boundedWait() && e.restarts == o.restarts && e.at.Sub(o.at).Abs() <= simWaitsRace:
		return explainedByWaits, true
	case (e.boundedWait() || o.boundedWait()) && e.restarts == o.restarts && (e.waitAfterBlind() || o.waitAfterBlind()):
		return explainedByBlindWait, true
	case e.phase == string(result.PhaseFailed) && o.phase == e.phase && e.reason == o.reason && e.reason != result.ReasonInternalError &&
		e.charged == o.charged:
		return explainedByCharge, true
	case e.phase == o.phase && e.reason == o.reason && (e.launcherAway || o.launcherAway):
		return explainedByLauncherAway, true
	case e.lateFault || o.lateFault:
		return explainedByLateFault, true
	case panicAwayExplains(e, o) || panicAwayExplains(o, e):
		return explainedByPanicAway, true
	case panicCutExplains(e, o):
		return explainedByPanicCut, true
	case e.phase == o.phase && e.reason == o.reason && goneUnseenExplains(e, o):
		return explainedByGoneUnseen, true
	}
	return "", false
}

// The explanations compare gives.
const (
	explainedByFaults    = "other faults took effect"
	explainedByTargets   = "the metrics moved the worker target along another path"
	explainedByDeadline  = "the deadline raced the job's end"
	explainedByWaits     = "two bounded waits passed together"
	explainedByBlindWait = "a wait's bound passed while the step could not act"
	explainedByCharge    = "failures found at once charge as those seen one at a time"
	// explainedByLauncherAway: an MPI launcher restarted in place and a
	// worker ended or went while no step watched; the pods do not keep
	// which came first (launcherJudgedAway).
	explainedByLauncherAway = "an MPI launcher's restart and a worker's end while no step watched, unordered"
	// explainedByLateFault: an exit or a disruption landed, or a relist
	// showed one no step saw land, too close to the end (the workflow
	// stopped, the deadline, a bound) for every order to have decided it.
	explainedByLateFault = "a fault landed too close to the end for every order to decide it"
	// explainedByGoneUnseen: a failure no step saw went with its pod (its
	// in-place restart with it) before the next step looked in one order,
	// not in another.
	explainedByGoneUnseen = "a failure no step saw went with its pod before the next step looked"
)

// goneUnseenExplains reports whether the end that counted fewer restarts
// lost at least as many failures, unseen, with their pods.
func goneUnseenExplains(e, o simEnd) bool {
	lo, hi := e, o
	if lo.restarts > hi.restarts {
		lo, hi = hi, lo
	}
	return int(hi.restarts-lo.restarts) <= len(lo.goneUnseen)
}

// waitAfterBlind reports whether the job ended on a bounded wait within
// simDecisionSlack of its step taking the Lease back or starting.
func (e simEnd) waitAfterBlind() bool {
	return e.boundedWait() && !e.resumed.IsZero() && e.at.Sub(e.resumed) <= simDecisionSlack
}

// simComparisons tallies the order comparisons of a run of the tests: how
// many matched strictly, and what explained each of the others.
type simComparisons struct {
	mu        sync.Mutex
	strict    int
	explained map[string]int
}

var simTally = &simComparisons{explained: map[string]int{}}

func (c *simComparisons) add(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if why == "" {
		c.strict++
		return
	}
	c.explained[why]++
}

func (c *simComparisons) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.strict, c.explained = 0, map[string]int{}
}

// String says how many comparisons were strict, in share, and what
// explained the others, most first.
func (c *simComparisons) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := c.strict
	var whys []string
	for why, n := range c.explained {
		total += n
		whys = append(whys, why)
	}
	slices.SortFunc(whys, func(a, b string) int { return cmp.Or(cmp.Compare(c.explained[b], c.explained[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, why := range whys {
		parts = append(parts, fmt.Sprintf("%d %s", c.explained[why], why))
	}
	share := 100.0
	if total > 0 {
		share = 100 * float64(c.strict) / float64(total)
	}
	out := fmt.Sprintf("%d order comparisons, %d strict on phase, reason and restarts (%.2f%%)", total, c.strict, share)
	if len(parts) > 0 {
		out += "; the others explained by the script: " + strings.Join(parts, ", ")
	}
	return out
}

// boundedWait reports whether the job ended Transient because a wait for
// room passed its bound.
func (e simEnd) boundedWait() bool {
	switch e.reason {
	case result.ReasonUnschedulable, result.ReasonPendingTimeout, result.ReasonQuotaExceeded:
		return e.phase == string(result.PhaseTransient)
	}
	return false
}

// simWaitsRace is how close two bounded waits' ends must be to race: a
// sync due at a bound comes up to a few hundred milliseconds late.
const simWaitsRace = time.Second

// near reports whether the job ended within simDecisionSlack of t.
func (e simEnd) near(t time.Time) bool {
	return !t.IsZero() && e.at.Sub(t).Abs() <= simDecisionSlack
}

func (e simEnd) String() string {
	targets := ""
	if len(e.targets) > 0 {
		targets = fmt.Sprintf("; worker targets %v", e.targets)
	}
	return fmt.Sprintf("%s/%s with %d counted restarts (%d re-attaches; faults landed: %s%s)", e.phase, e.reason, e.restarts, e.reattached, e.landed, targets)
}

// simRun is one schedule under one delivery order.
type simRun struct {
	s       schedule
	w       *simWorld
	faults  []fault
	ctx     context.Context
	end     *simEnd
	retries int
	// cur is the step running now (nil between a kill or a retry and the
	// next step's start); owners are the owner UIDs of every step so far.
	cur    *simStep
	owners []types.UID
	// ended is how the schedule's last step ended; stopped: it was stopped.
	ended   policy.Ending
	stopped bool
	// truth is what each exit that landed must cost (sim_truth_test.go);
	// inFlight, what those a watch had yet to deliver cost if it ends first.
	truth    []truthFailure
	inFlight []inFlightFailure
	// unwatchedSince is when the last step stopped watching (killed, or
	// ended for a retry); launcherAway: a step that re-attached found an
	// MPI launcher's restart and a worker's end it could not order.
	unwatchedSince time.Time
	launcherAway   bool
	// unreported: the workflow was stopped while no step ran; no run
	// reported the end.
	unreported bool
	// lastDecided is when a step that held the Lease last synced; ledLast
	// is when a started step last held it (at a renewal); ledgerLostAt is
	// when a step died while the ledger's Service, removed from outside,
	// was not created again: what only that step recorded is gone.
	lastDecided, ledLast, ledgerLostAt time.Time
	// gcTaken counts the replica pods the garbage collector deleted with
	// an evicted step pod whose hand-over could not clear their owner.
	gcTaken int32
	// permanentPod is the instance whose exit is permanentExit, at job
	// attempt permanentAttempt; permanentUnseen: no step saw it yet;
	// permanentCollective: an error exit of a rank that fails with its
	// peers.
	permanentPod                         types.UID
	permanentAttempt                     string
	permanentUnseen, permanentCollective bool
	// ctrlStarted is when the running controller started: one that
	// re-attaches after the job's deadline passed must end it from there.
	// jobStarted is when the job started, as the API server's objects
	// showed it then (jobStartShown): the deadline counts from there.
	ctrlStarted, jobStarted time.Time
	// violations are the invariants broken, each with when; broken holds
	// each one's text, so that it is said once.
	violations, broken []string
	// decided holds the last decision and its restarts, for the teardown.
	teardown bool
	plan     policy.CleanupPlan
	// abandoned: the step's retries ran out with the objects left in place.
	abandoned bool
	// permanentExit names an exit the restart policy cannot retry that
	// landed: the job must fail.
	permanentExit string
	// restartingSince is when the current whole-job restart began.
	restartingSince time.Time
	// lastLanded is when an injected exit or disruption last landed.
	lastLanded time.Time
	// queued numbers the injected exits and disruptions in the script's
	// order; settled counts those that landed or gave up. Each lands only
	// once every earlier one has.
	queued, settled int
	// took lists the places of those that landed, each with the job attempt it hit.
	took []string
	// targets lists the worker targets the metrics moved the job to.
	targets []int
	// awaiting are the exits meant for while the step is away.
	awaiting []awaitedExit
	// instances holds, per replica and job attempt, the first instance
	// created: a job that restarts as a whole never replaces one alone.
	instances map[string]types.UID
	// instanceGen is the step generation that created each pod.
	instanceGen map[types.UID]int
	// panicOnPod makes the controller's next pod event panic in its
	// handler (OnPod); panicking says an injected panic fired while the run
	// went on: it must end Failed InternalError.
	panicOnPod, panicking bool
	// panicAway and panicCut: what the injected panic hit (sim_panics_test.go).
	panicAway string
	panicCut  []string
}

func (r *simRun) violate(format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	if slices.Contains(r.broken, what) {
		return // said once, with when it first broke
	}
	r.broken = append(r.broken, what)
	msg := fmt.Sprintf("t=%s: ", r.w.now().Sub(simEpoch)) + what
	r.violations = append(r.violations, msg)
	r.w.logf("VIOLATION %s", msg)
}

func (r *simRun) stateLine() string {
	var parts []string
	for _, p := range r.w.jobPods() {
		parts = append(parts, describe(p))
	}
	c := r.w.ctrl
	if c == nil {
		return "no controller; pods: " + strings.Join(parts, ", ")
	}
	var stages []string
	c.mu.Lock()
	for _, id := range c.order {
		st := c.replicas[id]
		stages = append(stages, fmt.Sprintf("%s:%s@%s", st.id, st.stage, st.uid))
	}
	restarting := c.restarting != nil
	c.mu.Unlock()
	return fmt.Sprintf("controller: job attempt %d, restarting %v, replicas %s; pods: %s", c.jobAttempt, restarting,
		strings.Join(stages, " "), strings.Join(parts, ", "))
}

// checkInvariants holds after every step.
func (r *simRun) checkInvariants() {
	w := r.w
	live := map[string]int{}
	for _, p := range w.jobPods() {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		key := p.Labels[v1alpha1.LabelReplicaType] + "/" + p.Labels[v1alpha1.LabelReplicaIndex]
		live[key]++
		if live[key] > 1 {
			r.violate("two live pods for replica %s", key)
		}
		if c := w.ctrl; c != nil && c.Started() && c.restarting == nil && !r.over() {
			if got := jobAttemptOf(p); got != c.jobAttempt {
				r.violate("pod %s runs at job attempt %d while the job is at %d", describe(p), got, c.jobAttempt)
			}
		}
	}
	c := w.ctrl
	if c == nil || !c.Started() {
		return
	}
	if v := c.View(); int(v.Restarts) > r.s.counted {
		r.violate("%d counted restarts, but only %d failures were injected", v.Restarts, r.s.counted)
	}
	if r.over() || r.cur == nil || !r.cur.leading {
		return // nothing is decided while the step does not hold the Lease
	}
	if d := w.job.Spec.RunPolicy.ActiveDeadlineSeconds; d != nil {
		deadline := r.jobStarted.Add(time.Duration(*d) * time.Second)
		if due := maxTime(maxTime(deadline, r.ctrlStarted), r.cur.leadSince); w.now().Sub(due) > simDecisionSlack {
			r.violate("running %s past activeDeadlineSeconds=%d", w.now().Sub(deadline), *d)
		}
	}
	switch {
	case c.restarting == nil:
		r.restartingSince = time.Time{}
	case r.restartingSince.IsZero():
		r.restartingSince = w.now()
	case w.now().Sub(maxTime(r.restartingSince, r.cur.leadSince)) > simTimeouts.NodeLost+2*time.Minute:
		r.violate("a whole-job restart under way for %s: %s", w.now().Sub(r.restartingSince), r.stateLine())
		r.restartingSince = w.now() // once per stretch
	}
}

// simSettle is the policy's wait for a peer's earlier exit in a job that
// restarts as a whole: two injected exits are kept at least this far apart.
const simSettle = 10 * time.Second

// simWorkEndsAfter is how long after the last exit or disruption landed
// the work may end: the policy's settle and its decision come first.
const simWorkEndsAfter = simSettle + simDecisionSlack + 5*time.Second

// simDecisionSlack bounds how late a decision due at a time may come: the
// deliveries' and syncs' delays.
const simDecisionSlack = 15 * time.Second

// podCreated checks, for a job that restarts as a whole, that no replica
// gets a second instance at one job attempt.
func (r *simRun) podCreated(pod *corev1.Pod) {
	if r.instanceGen[pod.UID] == 0 {
		r.instanceGen[pod.UID] = r.w.gen
	}
	if c := r.w.ctrl; c != nil && c.scaler != nil && pod.Labels[v1alpha1.LabelReplicaType] == "worker" {
		// Called within the controller's create: its target stands still.
		if i, _ := strconv.Atoi(pod.Labels[v1alpha1.LabelReplicaIndex]); i >= c.scaler.target {
			r.violate("worker %s created at or above the metrics' target of %d workers", pod.Name, c.scaler.target)
		}
	}
	if !frameworks.RestartsWithJob(r.w.job, replicaTypeOf(r.w.job, pod)) {
		return
	}
	key := pod.Name + "@" + pod.Labels[v1alpha1.LabelJobAttempt]
	if first, ok := r.instances[key]; ok && first != pod.UID && !r.startsAfresh(pod) {
		r.violate("replica %s has a second instance at job attempt %s (%s, then %s): a job that restarts as a whole moves every replica to the next attempt", pod.Name, pod.Labels[v1alpha1.LabelJobAttempt], first, pod.UID)
		return
	}
	r.instances[key] = pod.UID
}

// startsAfresh reports a pod a step creates while no pod of its job
// attempt that an earlier step made is left: every earlier instance went
// while no step watched (pod GC, preemption), none recorded the attempt,
// and the step starts the job again from nothing, where no rank of the old
// instances can meet the new ones.
func (r *simRun) startsAfresh(pod *corev1.Pod) bool {
	created := r.instanceGen[pod.UID]
	for _, p := range r.w.jobPods() {
		if p.UID == pod.UID || p.Labels[v1alpha1.LabelJobAttempt] != pod.Labels[v1alpha1.LabelJobAttempt] {
			continue
		}
		if gen, ok := r.instanceGen[p.UID]; !ok || gen < created {
			return false
		}
	}
	first := r.instances[pod.Name+"@"+pod.Labels[v1alpha1.LabelJobAttempt]]
	return r.instanceGen[first] != 0 && r.instanceGen[first] < created
}

// inject carries out one fault of the script.
func (r *simRun) inject(f *fault) {
	w := r.w
	w.logf("FAULT %s", f)
	switch f.kind {
	case faultExit:
		r.exitWhenRunning(f.replica, f.code, f, r.queue(), 0)
	case faultDisruption:
		r.disruptWhenThere(f, r.queue(), 0)
	case faultNodeDown:
		r.nodeDown(f)
	case faultAPI:
		w.apiFaults = append(w.apiFaults, apiFault{from: w.now(), until: w.now().Add(f.lasts), code: int(f.code), applied: f.applied})
	case faultQuota:
		w.quotaFrom, w.quotaUntil = w.now(), w.now().Add(f.lasts)
	case faultKillDuringExit:
		seq := r.queue()
		r.awaiting = append(r.awaiting, awaitedExit{seq: seq, replica: f.replica})
		r.killStep(f.lasts)
		w.after(f.lasts/2, 0, "exit while away", func() { r.exitWhenRunning(f.replica, f.code, f, seq, 0) })
	case faultKillStep:
		r.killStep(f.lasts)
	case faultLoad:
		w.load = int64(f.code)
	case faultAPIRestart, faultCompact, faultThrottle, faultRemove, faultStop, faultDrainStep:
		r.injectControlPlane(f)
	case faultPanic:
		if w.ctrl == nil || r.over() {
			return // no step runs to panic
		}
		// Armed as its disruption lands, not before: the next create or pod
		// event is the disruption's, not whichever came first.
		arm := func() {
			if w.ctrl == nil || r.over() {
				return // no step runs to panic
			}
			if f.disruption == "a pod create" {
				w.panicOnPodCreate = true
			} else {
				r.panicOnPod = true
			}
		}
		r.disruptWhenThere(&fault{replica: f.replica, disruption: "podgc", onLanding: arm}, r.queue(), 0)
	}
}

// awaitedExit is an exit that lands while no step runs: the successor
// waits for it while its replica runs (a second kill while the step is
// away waits with the first's successor).
type awaitedExit struct {
	seq     int
	replica string
}

// exitAwaited reports whether an exit meant for while the step is away has
// yet to land on a replica that runs.
func (r *simRun) exitAwaited() bool {
	for _, a := range r.awaiting {
		if pod := r.w.livePod(a.replica); a.seq >= r.settled && pod != nil && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

// stepEnding is how long an exit, a disruption or the work's end waits
// because the running step is ending (0 when it is not): whether that
// ending is the run's (a teardown) or Argo retries the step (Transient,
// the job's objects left), which then goes on with the job, is not known
// yet. The replicas do not stop for a step's end: dropped there, an exit
// whose turn came never landed under the retry, and the work, which ends
// once every one landed, never ended (seed 899287562).
func (r *simRun) stepEnding() time.Duration {
	if r.over() {
		return time.Second
	}
	return 0
}

// queue numbers the next injected exit or disruption.
func (r *simRun) queue() int {
	r.queued++
	return r.queued - 1
}

// waitsItsTurn reports whether the exit or disruption seq must wait,
// and for how long: until every earlier one landed, since which replica
// runs first is the order's (a gang held until there was room lets
// several wait together); then until simSettle after the last landed,
// since two that close are one failure to a job that restarts as a whole
// (the later taken for a consequence), and which came first would be the
// order's.
func (r *simRun) waitsItsTurn(seq int) time.Duration { return r.waitsItsTurnAfter(seq, simSettle) }

// waitsItsTurnAfter is waitsItsTurn with gap instead of the policy's settle
// after the last one landed.
func (r *simRun) waitsItsTurnAfter(seq int, gap time.Duration) time.Duration {
	if seq > r.settled {
		return time.Second
	}
	if !r.lastLanded.IsZero() && r.w.now().Sub(r.lastLanded) < gap {
		return gap - r.w.now().Sub(r.lastLanded)
	}
	return 0
}

// nextTry counts one more look for a replica to exit or disrupt, except
// while its gang waits for room: when the replica runs at last, the look
// that gives up must not race with its start.
func (r *simRun) nextTry(tries int) int {
	if r.w.now().Before(r.w.roomFrom) {
		return tries
	}
	return tries + 1
}

// landed records that the exit or disruption whose turn it was landed
// (or gave up).
func (r *simRun) landed(gaveUp bool, pod *corev1.Pod) {
	r.settled++
	if !gaveUp {
		r.lastLanded = r.w.now()
		r.took = append(r.took, fmt.Sprintf("%d@%d", r.settled, jobAttemptOf(pod)))
	}
}

// landedFaults names, by their place in the script's queue and the job
// attempt of the instance each hit, the exits and disruptions that took
// effect, of how many were queued. A fault that hit another attempt in
// another order (it came before or after a restart) is another script.
func (r *simRun) landedFaults() string {
	return fmt.Sprintf("%v of %d", r.took, r.queued)
}

// exitWhenRunning makes the replica's current instance exit once it runs
// (its next instance, when none runs now), then its peers if the job
// restarts as a whole: their collective broke. seq is the exit's place in
// the script (queue).
func (r *simRun) exitWhenRunning(name string, code int32, f *fault, seq, tries int) {
	w := r.w
	if r.end != nil {
		return
	}
	if d := max(r.stepEnding(), r.waitsItsTurn(seq)); d > 0 {
		w.after(d, 0, "retry exit "+name, func() { r.exitWhenRunning(name, code, f, seq, tries) })
		return
	}
	restarting := w.ctrl != nil && w.ctrl.restarting != nil
	pod := w.livePod(name)
	if pod == nil || pod.DeletionTimestamp != nil || !w.exit(pod, code) {
		if tries < 120 {
			next := r.nextTry(tries)
			w.after(time.Second, 0, "retry exit "+name, func() { r.exitWhenRunning(name, code, f, seq, next) })
		} else {
			r.landed(true, nil) // never ran again: the later ones go on
		}
		return
	}
	r.landed(false, pod)
	r.noteFailure(pod, code, restarting)
	if !restarting && r.permanent(pod, code) && !r.followsPeersEnd(pod, code) {
		// Not a peer stopped by a whole-job restart under way, nor one
		// that failed after a peer of its attempt ended: a failure the
		// policy cannot retry, whether or not a step saw it happen.
		r.permanentExit, r.permanentPod = name+" exit "+strconv.Itoa(int(code)), pod.UID
		r.permanentUnseen = w.ctrl == nil || w.watchBroken
		// An error exit of a collective rank: a peer lost without trace
		// before any step saw either may be judged its cause.
		r.permanentCollective = code < 128 && restartsAsWhole(w.job) && frameworks.FailsWithPeers(w.job, replicaTypeOf(w.job, pod))
		r.permanentAttempt = pod.Labels[v1alpha1.LabelJobAttempt]
	}
	r.breakPeers(f)
}

// permanent reports whether an exit of pod with code is one the job's
// restart policy does not retry (elastic workers are tolerated instead).
func (r *simRun) permanent(pod *corev1.Pod, code int32) bool {
	job := r.w.job
	if (job.Spec.ElasticPolicy != nil) || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return false
	}
	spec := job.Spec.ReplicaSpecs[v1alpha1.ReplicaType(replicaTypeOf(job, pod))]
	if spec == nil {
		return false
	}
	return policy.DecideRestart(spec, policy.Replica{Phase: policy.PhaseFailed, ExitCode: &code}) == policy.FailPermanently
}

// followsPeersEnd reports whether pod, exiting now with code, fails after
// a peer of its job attempt ended: in a job that
// restarts as a whole the first end is the cause and the later ones are
// collateral (docs/failures.md). Ends compare in whole seconds, as pod
// times do; within one, a peer ended from outside (a signal, a
// disruption) comes first. A peer's instance made again at the same
// attempt (a gang's release, a step that started the job afresh) ended
// before the collective pod belongs to was formed: it is no cause.
func (r *simRun) followsPeersEnd(pod *corev1.Pod, code int32) bool {
	w := r.w
	if !restartsAsWhole(w.job) {
		return false
	}
	now := w.now().Truncate(time.Second)
	// A peer removed after its end counts too: a step that re-attaches
	// finds it gone, a loss that comes first.
	for _, p := range append(w.jobPods(), w.removedEnded...) {
		// A peer is another replica that restarts with the job (an MPI
		// launcher's end breaks no worker), of the same job attempt.
		if p.Name == pod.Name || p.Labels[v1alpha1.LabelJobAttempt] != pod.Labels[v1alpha1.LabelJobAttempt] ||
			!frameworks.RestartsWithJob(w.job, replicaTypeOf(w.job, p)) {
			continue
		}
		at, fromOutside, ended := simEnded(p)
		if !ended || w.superseded(p) {
			continue
		}
		if at = at.Truncate(time.Second); at.Before(now) || at.Equal(now) && fromOutside && code < 128 {
			return true
		}
	}
	return false
}

// superseded reports whether a newer instance of p's replica was made at
// p's job attempt: one live now, or one removed after p was.
func (w *simWorld) superseded(p *corev1.Pod) bool {
	attempt := p.Labels[v1alpha1.LabelJobAttempt]
	if live := w.livePod(p.Name); live != nil && live.UID != p.UID && live.Labels[v1alpha1.LabelJobAttempt] == attempt {
		return true
	}
	after := false
	for _, q := range w.removedEnded {
		after = after || q.UID == p.UID
		if after && q.UID != p.UID && q.Name == p.Name && q.Labels[v1alpha1.LabelJobAttempt] == attempt {
			return true
		}
	}
	return false
}

// simEnded says whether pod failed, when its container ended (the zero
// time, earliest of all, when it was stopped before its container's end
// was written) and whether from outside: a signal or a disruption.
func simEnded(pod *corev1.Pod) (at time.Time, fromOutside, ended bool) {
	if pod.Status.Phase != corev1.PodFailed {
		return time.Time{}, false, false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1alpha1.PodConditionDisruptionTarget && c.Status == corev1.ConditionTrue {
			fromOutside = true
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return t.FinishedAt.Time, fromOutside || t.ExitCode >= 128, true
		}
	}
	return time.Time{}, true, true
}

// replicaTypeOf finds the spec's replica type of a pod (its label is lower case).
func replicaTypeOf(job *v1alpha1.TrainJob, pod *corev1.Pod) v1alpha1.ReplicaType {
	for rt := range job.Spec.ReplicaSpecs {
		if strings.EqualFold(string(rt), pod.Labels[v1alpha1.LabelReplicaType]) {
			return rt
		}
	}
	return ""
}

// breakPeers makes the peers of a job that restarts as a whole exit 1.
func (r *simRun) breakPeers(f *fault) { r.breakPeerInstances(f, r.peerInstances(f)) }

// peerInstances are the instances of f's peers live now: those that share
// the collective f breaks.
func (r *simRun) peerInstances(f *fault) map[string]types.UID {
	uids := map[string]types.UID{}
	if f == nil {
		return uids
	}
	for p := range f.peers {
		if pod := r.w.livePod(p); pod != nil {
			uids[p] = pod.UID
		}
	}
	return uids
}

// breakPeerInstances makes the instances uids of f's peers exit 1, each
// after its delay. Only the instances that shared the broken collective
// fail: a peer of the next job attempt, created meanwhile, does not.
func (r *simRun) breakPeerInstances(f *fault, uids map[string]types.UID) {
	w := r.w
	if f == nil || !restartsAsWhole(w.job) {
		return
	}
	for _, p := range replicaNames(w.job) {
		d, ok := f.peers[p]
		if !ok || !breaksWith(w.job, f.replica, p) {
			continue
		}
		uid := uids[p]
		w.after(d, 0, "peer breaks "+p, func() { r.breakPeer(p, uid, 0) })
	}
}

// breakPeer makes the instance uid of replica p exit 1. One not running yet
// exits once it starts: it cannot join a collective that already broke.
func (r *simRun) breakPeer(p string, uid types.UID, tries int) {
	w := r.w
	pod := w.livePod(p)
	if pod == nil || pod.UID != uid || pod.DeletionTimestamp != nil || w.exit(pod, 1) {
		return
	}
	if pod.Status.Phase == corev1.PodPending && tries < 600 {
		w.after(100*time.Millisecond, 0, "peer breaks once started "+p, func() { r.breakPeer(p, uid, tries+1) })
	}
}

// breaksWith reports whether replica peer's process fails when replica
// failed's ends. Ranks of one collective all do; in an MPI job only mpirun,
// the launcher, notices a worker's end, and the workers (sshd) outlive it.
func breaksWith(job *v1alpha1.TrainJob, failed, peer string) bool {
	if job.Spec.Framework != v1alpha1.FrameworkMPI {
		return true
	}
	launcher := render.PodName(job.Name, v1alpha1.ReplicaTypeLauncher, 0)
	return peer == launcher && failed != launcher
}

// serves reports whether pod's replica serves the others until the job
// ends rather than finishing work of its own: a parameter server, an MPI
// worker (its sshd).
func serves(job *v1alpha1.TrainJob, pod *corev1.Pod) bool {
	switch replicaTypeOf(job, pod) {
	case v1alpha1.ReplicaTypePS:
		return true
	case v1alpha1.ReplicaTypeWorker:
		return job.Spec.Framework == v1alpha1.FrameworkMPI
	}
	return false
}

func restartsAsWhole(job *v1alpha1.TrainJob) bool {
	for rt := range job.Spec.ReplicaSpecs {
		if frameworks.RestartsWithJob(job, rt) {
			return true
		}
	}
	return false
}

// disruptWhenThere disrupts the replica's instance: a DisruptionTarget
// condition, then its deletion — graceful for preemption and eviction,
// forced a moment later for the pod garbage collector.
func (r *simRun) disruptWhenThere(f *fault, seq, tries int) {
	w := r.w
	if r.end != nil {
		return
	}
	gap := simSettle
	if f.onLanding != nil {
		// A panic ends the run wherever it stands: it lands once the
		// decision on the fault before it was taken, whatever the order.
		gap = simSettle + simDecisionSlack
	}
	if d := max(r.stepEnding(), r.waitsItsTurnAfter(seq, gap)); d > 0 {
		w.after(d, 0, "retry disruption "+f.replica, func() { r.disruptWhenThere(f, seq, tries) })
		return
	}
	if w.outage() {
		// The scheduler, the drain and the pod garbage collector act
		// through kube-apiserver, which refuses them while it restarts.
		w.after(time.Second, 0, "retry disruption "+f.replica, func() { r.disruptWhenThere(f, seq, tries) })
		return
	}
	pod := w.livePod(f.replica)
	// Preemption, a drain's eviction and the pod garbage collector take
	// a running pod: one bound but not started has no peers to break.
	if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		if tries < 120 {
			next := r.nextTry(tries)
			w.after(time.Second, 0, "retry disruption "+f.replica, func() { r.disruptWhenThere(f, seq, next) })
		} else {
			r.landed(true, nil)
		}
		return
	}
	r.landed(false, pod)
	if f.onLanding != nil {
		if w.ctrl != nil {
			// A panic is armed only while a step runs: an order in which
			// its disruption landed while no step ran is another script.
			r.took[len(r.took)-1] += "+panic"
		}
		f.onLanding()
	}
	r.disrupt(pod, f.disruption)
	r.breakPeersOnceStopped(f, pod.UID, r.peerInstances(f), 0)
}

// breakPeersOnceStopped breaks the peers of a disrupted instance once it
// stopped: their collective breaks when its process ends, not when its pod
// is marked (its kubelet may take seconds, or a finalizer keep the pod
// after). A rank on a node that stopped answering is cut off at once.
func (r *simRun) breakPeersOnceStopped(f *fault, uid types.UID, peers map[string]types.UID, tries int) {
	w := r.w
	pod := w.livePod(f.replica)
	if pod != nil && pod.UID == uid && pod.Status.Phase == corev1.PodRunning && tries < 600 {
		if n := w.node(pod.Spec.NodeName); n != nil && n.up {
			w.after(100*time.Millisecond, 0, "peers of "+f.replica+" wait", func() { r.breakPeersOnceStopped(f, uid, peers, tries+1) })
			return
		}
	}
	r.breakPeerInstances(f, peers)
}

var disruptionReasons = map[string]string{"preemption": "PreemptionByScheduler", "eviction": "EvictionByEvictionAPI", "podgc": "DeletionByPodGC"}

func (r *simRun) disrupt(pod *corev1.Pod, how string) {
	w := r.w
	ended := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if how != "podgc" || !ended {
		// The pod garbage collector marks only a pod that has not ended,
		// in the patch that ends it (Kubernetes' markFailedAndDeletePodWithCondition).
		setCondition(pod, v1alpha1.PodConditionDisruptionTarget, corev1.ConditionTrue, disruptionReasons[how], w.now())
		w.updatePod(pod, "disruption target")
	}
	if how == "podgc" {
		name, uid := pod.Name, pod.UID
		w.after(time.Millisecond, 0, "pod gc deletes "+name, func() {
			live := w.livePod(name)
			if live == nil || live.UID != uid {
				return
			}
			if live.Status.Phase != corev1.PodSucceeded && live.Status.Phase != corev1.PodFailed {
				// The pod garbage collector ends the pod before it deletes
				// it: a finalizer may keep it, and no kubelet will.
				live.Status.Phase = corev1.PodFailed
				w.updatePod(live, "pod gc ends")
			}
			_ = w.remove(podsGVR, live)
		})
		return
	}
	now := metav1.NewTime(w.now())
	pod.DeletionTimestamp = &now
	if err := w.tracker.Update(podsGVR, pod, pod.Namespace); err == nil {
		w.emit(podsGVR, watch.Modified, pod)
		w.kubeletFinishesDeletion(pod)
	}
}

// nodeDown silences a node's kubelet: after the node monitor's grace its
// running pods turn NotReady; it answers again after f.lasts, or its Node
// object is deleted and the pod garbage collector removes its pods. Each of
// these is a controller's write, which waits for kube-apiserver to answer
// (whenAnswering).
func (r *simRun) nodeDown(f *fault) {
	w := r.w
	n := w.nodes[f.node]
	if !n.up || n.deleted {
		return
	}
	n.up = false
	const monitorGrace = 20 * time.Second
	w.whenAnswering(monitorGrace, "node lifecycle marks "+n.name, func() {
		if n.up {
			return
		}
		for _, p := range w.jobPods() {
			if p.Spec.NodeName == n.name && p.Status.Phase == corev1.PodRunning {
				setCondition(p, corev1.PodReady, corev1.ConditionFalse, "NodeNotReady", w.now())
				w.updatePod(p, "node not ready")
			}
		}
	})
	if f.deleted {
		w.whenAnswering(monitorGrace+5*time.Second, "node deleted "+n.name, func() {
			if n.up {
				return // it answered again first
			}
			n.deleted = true
			for _, p := range w.jobPods() {
				if p.Spec.NodeName == n.name {
					r.disrupt(p, "podgc")
				}
			}
		})
	}
	w.after(f.lasts, 0, "node answers "+n.name, func() { r.nodeUp(n) })
}

// nodeUp brings a node back: its pods are Ready again and the deletions
// it was asked for finish.
func (r *simRun) nodeUp(n *simNode) {
	w := r.w
	if n.deleted {
		n.deleted = false // a new node of the same name joins
	}
	n.up = true
	for _, p := range w.jobPods() {
		if p.Spec.NodeName != n.name {
			continue
		}
		if p.DeletionTimestamp != nil {
			w.kubeletFinishesDeletion(p)
			continue
		}
		if p.Status.Phase == corev1.PodRunning {
			setCondition(p, corev1.PodReady, corev1.ConditionTrue, "", w.now())
			w.updatePod(p, "node ready")
		}
		if p.Status.Phase == corev1.PodPending {
			// Bound while the node was silent: its kubelet starts it now.
			name, uid := p.Name, p.UID
			w.after(time.Duration(100+w.rng.IntN(900))*time.Millisecond, 0, "start "+name, func() { w.start(name, uid) })
		}
	}
}

// successWave: every running replica that does not serve the others (see serves) finishes its
// work, again every 20 s while the job runs (replicas created later too).
func (r *simRun) successWave() {
	w := r.w
	if r.end != nil {
		return
	}
	if d := r.stepEnding(); d > 0 {
		w.after(d, 0, "success", r.successWave)
		return
	}
	w.apiFaults, w.quotaUntil = nil, time.Time{}
	for _, n := range w.nodes {
		if !n.up || n.deleted {
			n.deleted = false
			r.nodeUp(n)
		}
	}
	if r.settled < r.queued || (!r.lastLanded.IsZero() && w.now().Sub(r.lastLanded) < simWorkEndsAfter) {
		// An injected exit or disruption is still to land (its replica ran
		// late, e.g. a gang held until there was room), or landed just now:
		// the work ends once it settled, or which came first would be the
		// order's.
		w.after(time.Second, 0, "success", r.successWave)
		return
	}
	for _, p := range w.jobPods() {
		if !serves(w.job, p) && p.DeletionTimestamp == nil {
			w.exit(p, 0)
		}
	}
	w.after(20*time.Second, 0, "success", r.successWave)
}

// TestSimulation runs drawn schedules: the first half from fixed seeds,
// the rest from a fresh base each run (TRAINSTEP_SIM_BASE sets it), so
// every run also looks somewhere new. A failure prints its schedule and the
// command that replays it.
func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		runAndCheck(t, drawSchedule(*simSeed), true)
		return
	}
	schedules := *simSchedules
	if schedules == 0 {
		schedules = 2000
		if raceEnabled {
			schedules = 200
		}
	}
	base := uint64(time.Now().UnixNano()%1_000_000_000) + 1_000_000
	if env := os.Getenv("TRAINSTEP_SIM_BASE"); env != "" {
		base, _ = strconv.ParseUint(env, 10, 64)
	}
	// Fixed seeds first, then fresh ones from a base printed for replays.
	fixed := min(schedules/2, 1000)
	t.Logf("simulation: %d fixed schedules (seeds 1..%d), %d fresh from seed %d", fixed, fixed, schedules-fixed, base)
	simTally.reset()
	defer func() { t.Logf("simulation: %s", simTally) }()
	failed := 0
	for i := range schedules {
		seed := uint64(i + 1)
		if i >= fixed {
			seed = base + uint64(i-fixed)
		}
		if !runAndCheck(t, drawSchedule(seed), false) {
			failed++
			if failed >= 5 {
				t.Fatalf("stopping after %d failing schedules", failed)
			}
		}
	}
}

// runAndCheck runs one schedule under several delivery orders and reports
// what broke; with trace, the world's whole trace is logged.
func runAndCheck(t *testing.T, s schedule, trace bool) bool {
	t.Helper()
	return runOrders(t, s, *simOrders, trace) != nil
}

// runOrders runs s under orders delivery orders and returns how it ended
// (nil, with the test failed, when an invariant broke or two orders ended
// differently).
func runOrders(t *testing.T, s schedule, orders int, trace bool) *simEnd {
	t.Helper()
	if errs := frameworks.Validate(s.job); len(errs) > 0 {
		// A job trainstep refuses before creating anything has no run.
		t.Errorf("%sthe job is invalid: %v\nreplay: %s", s, errs.ToAggregate(), s.replay())
		return nil
	}
	var first *simEnd
	for order := range uint64(orders) {
		run := runSchedule(s, s.seed*7919+order, trace)
		if trace {
			t.Logf("order %d trace:\n%s", order, strings.Join(run.w.trace, "\n"))
		}
		if len(run.violations) > 0 {
			t.Errorf("%sorder %d: %s\nreplay: %s", s, order, strings.Join(run.violations, "\n  "), s.replay())
			return nil
		}
		if first == nil {
			first = run.end
			continue
		}
		why, ok := run.end.compare(*first)
		if !ok {
			t.Errorf("%sorder 0 ended %s, order %d ended %s, and nothing in the script explains the difference\nreplay: %s", s, first, order, run.end, s.replay())
			return nil
		}
		simTally.add(why)
	}
	return first
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
