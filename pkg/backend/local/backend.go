package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
)

// Restart pacing. A kubelet waits 10 s before the first restart of a
// crashing container, doubling up to 5 min; locally there is no image to
// pull or node to spare, so the delays are shorter, keeping a crash loop
// from spinning while giving quick feedback.
const (
	DefaultRestartDelay = time.Second
	maxRestartDelay     = 30 * time.Second
	// backoffResetAfter: an instance that ran this long restarts without delay history.
	backoffResetAfter = time.Minute
)

// exitCodeStartError is the exit code of a command that could not be
// started, as container runtimes report a StartError.
const exitCodeStartError = 128

// Options configure one local run.
type Options struct {
	// Job is defaulted and validated (spec.Load).
	Job *v1alpha1.TrainJob
	// Timeouts are passed to policy.Decide.
	Timeouts policy.Timeouts
	// Logs selects which replicas' output reaches LogOutput, each line
	// prefixed "[worker-1] "; LogOutput nil discards all.
	Logs      logs.Mode
	LogOutput io.Writer
	Logger    *zap.Logger
	Clock     clock.WithTicker
	// MaxStopGrace bounds the time between SIGTERM and SIGKILL of one
	// process (the pod template's terminationGracePeriodSeconds, else
	// DefaultStopGrace).
	MaxStopGrace time.Duration
	// RestartDelay is the wait before a replica's first restart; it doubles
	// with each further restart.
	RestartDelay time.Duration
	// OnView, when set, is called with the replicas after every decision.
	OnView func(*policy.View)
	// JobEnv is what trainstep gives every container before the template's
	// own variables, as in a cluster (the progress endpoint's): the
	// template may refer to them, and a variable it sets itself wins.
	JobEnv []corev1.EnvVar
	// Environ is the environment every process starts from; nil means
	// trainstep's own.
	Environ []string
	// Supervisor is the command (argv) that runs each replica under a
	// supervisor: trainstep's hidden supervise command, which calls
	// Supervise. On Linux it makes sure that no process of a replica
	// outlives trainstep, even one killed by SIGKILL. Empty, or on other
	// systems, replicas are trainstep's own children.
	Supervisor []string
}

// Outcome is how a local run ended.
type Outcome struct {
	// Decision is the final one, or the one in force when the run was
	// cancelled; View the replicas it was taken on, before any was stopped.
	Decision policy.Decision
	View     policy.View
	// Terminated is true when the context ended the run before the job did.
	Terminated bool
}

// Run runs the job's replicas as local processes until the policy ends
// the job or ctx is cancelled, then stops every process it started and
// returns. The error is an Invalid result error when the job cannot run
// here (a replica without a command, a command not on this machine), or a
// failure to prepare the run; a failed job is an Outcome, not an error.
func Run(ctx context.Context, opts Options) (Outcome, error) {
	opts.setDefaults()
	dir, err := os.MkdirTemp("", "trainstep-"+opts.Job.Name+"-")
	if err != nil {
		return Outcome{}, fmt.Errorf("creating the run's directory: %w", err)
	}
	defer os.RemoveAll(dir)
	b, err := newBackend(opts, dir)
	if err != nil {
		return Outcome{}, err
	}
	defer close(b.done)
	return b.run(ctx), nil
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.LogOutput == nil {
		o.LogOutput, o.Logs = io.Discard, logs.ModeNone
	}
	if o.Logs == "" {
		o.Logs = logs.ModeLeaders
	}
	if o.RestartDelay <= 0 {
		o.RestartDelay = DefaultRestartDelay
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
}

// backend is one run: the replicas, the events from their processes, and
// the job-wide counters the policy reads.
type backend struct {
	opts     Options
	job      *v1alpha1.TrainJob
	rule     frameworks.SuccessRule
	log      *zap.Logger
	prefixer *logs.Prefixer
	hostname string

	replicas []*replica
	byID     map[policy.ReplicaID]*replica
	// exits carries process exits to the run loop; done closes when Run
	// returns, releasing exits nobody reads any more.
	exits   chan exit
	pending []exit // exits of commands that could not start
	done    chan struct{}
	// recreations counts replicas replaced by a new instance (counted
	// ones); jobRestarts the counted whole-job restarts and jobAttempt the
	// current whole-job attempt.
	recreations, jobRestarts int32
	jobAttempt               int
	// settling is true while a failure waits for a peer's earlier exit.
	settling bool
	start    time.Time
}

// exit is one process's end; generation tells a stale exit from the
// current instance's.
type exit struct {
	replica    *replica
	generation int
	code       int32
}

func newBackend(opts Options, dir string) (*backend, error) {
	job := opts.Job
	hostname, _ := os.Hostname()
	namespace := job.Namespace
	if namespace == "" {
		namespace = DefaultNamespace
	}
	ids := policy.Desired(job)
	ports, err := freePorts(len(ids))
	if err != nil {
		return nil, err
	}
	portOf := make(map[policy.ReplicaID]int, len(ids))
	for i, id := range ids {
		portOf[id] = ports[i]
	}
	env := &environment{peers: newPeerBook(job.Name, namespace, portOf), hostname: hostname, local: frameworks.Local(job)}
	if env.configMaps, err = renderedConfigMaps(job, namespace); err != nil {
		return nil, err
	}
	var setup framework.LocalSetup
	if env.local != nil {
		if setup, err = env.local.LocalSetup(job, dir); err != nil {
			return nil, err
		}
	}
	env.mounts = setup.Mounts
	leaders := map[frameworks.ReplicaRef]bool{}
	for _, ref := range frameworks.Leaders(job) {
		leaders[ref] = true
	}
	p := &planner{
		job: job, identity: render.Identity{Namespace: namespace, JobName: job.Name, Labels: map[string]string{}},
		dir: dir, baseEnv: opts.Environ, env: env, jobEnv: plainVars(opts.JobEnv), setupEnv: plainVars(setup.Env), leaders: leaders, logs: opts.Logs,
		maxGrace: opts.MaxStopGrace, lookPath: exec.LookPath,
	}
	plans, warnings, err := p.plans()
	for _, w := range uniq(warnings) {
		opts.Logger.Warn(w)
	}
	if err != nil {
		return nil, err
	}
	b := &backend{
		opts: opts, job: job, rule: frameworks.SuccessRuleFor(job), log: opts.Logger,
		prefixer: logs.NewPrefixer(opts.LogOutput), hostname: hostname,
		byID: map[policy.ReplicaID]*replica{}, exits: make(chan exit), done: make(chan struct{}),
	}
	for _, pl := range plans {
		r := &replica{plan: pl, spec: job.Spec.ReplicaSpecs[pl.id.Type], phase: policy.PhasePending}
		b.replicas = append(b.replicas, r)
		b.byID[pl.id] = r
	}
	return b, nil
}

// run is the controller loop: start what is due, decide, carry out the
// decision, wait for a process to end or the next deadline.
func (b *backend) run(ctx context.Context) Outcome {
	b.start = b.opts.Clock.Now()
	for _, r := range b.replicas {
		if !r.slot {
			r.startAt = b.start
		}
	}
	b.log.Info("job started", zap.String("backend", "local"), zap.Int("processes", b.processCount()), zap.Int("replicas", len(b.replicas)))
	if slots := len(b.replicas) - b.processCount(); slots > 0 {
		b.log.Info(fmt.Sprintf("the %d MPI workers are not processes of their own: they are slots of this machine in the launcher's hostfile, "+
			"and the launcher's mpirun starts the ranks", slots))
	}
	for {
		b.startDue()
		view := b.view()
		decision := policy.Decide(&view, b.rule, b.opts.Timeouts)
		b.reportSettling(decision.Settling)
		if b.opts.OnView != nil {
			b.opts.OnView(&view)
		}
		if decision.Outcome != policy.OutcomeRunning {
			b.cleanup(view, false)
			return Outcome{Decision: decision, View: view}
		}
		if decision.RestartJob != nil {
			b.restartJob(decision.RestartJob)
			continue
		}
		if len(decision.Recreate)+len(decision.RecreateUncounted) > 0 {
			b.recreate(decision.Recreate, true)
			b.recreate(decision.RecreateUncounted, false)
			continue
		}
		if !b.wait(ctx, decision.RecheckAfter) {
			b.log.Info("stopping every replica: the run was cancelled")
			b.cleanup(view, true)
			return Outcome{Decision: decision, View: view, Terminated: true}
		}
	}
}

// wait blocks until a process exits, a replica is due to start, recheck
// has passed (when > 0) or ctx ends, and handles the exit. It returns
// false when ctx ended.
func (b *backend) wait(ctx context.Context, recheck time.Duration) bool {
	if len(b.pending) > 0 {
		e := b.pending[0]
		b.pending = b.pending[1:]
		b.exited(e)
		return true
	}
	next := recheck
	now := b.opts.Clock.Now()
	for _, r := range b.replicas {
		if !r.startAt.IsZero() {
			if d := max(r.startAt.Sub(now), time.Nanosecond); next == 0 || d < next {
				next = d
			}
		}
	}
	var wake <-chan time.Time
	if next > 0 {
		timer := b.opts.Clock.NewTimer(next)
		defer timer.Stop()
		wake = timer.C()
	}
	select {
	case <-ctx.Done():
		return false
	case e := <-b.exits:
		b.exited(e)
	case <-wake:
	}
	return true
}

// cleanup stops the processes still running when the job ends: those
// policy.Cleanup names first, then the rest, since a local process cannot
// outlive trainstep the way a pod kept by cleanPodPolicy outlives the step.
func (b *backend) cleanup(view policy.View, terminated bool) {
	for _, r := range b.replicas {
		r.startAt = time.Time{} // no restart is due any more
	}
	plan := policy.Cleanup(b.job.Spec.RunPolicy.CleanPodPolicyOrDefault(), terminated, view.Replicas)
	named := map[policy.ReplicaID]bool{}
	var first []*replica
	for _, id := range plan.Pods {
		named[id] = true
		if r := b.byID[id]; r != nil && r.proc != nil {
			first = append(first, r)
		}
	}
	b.stop(first)
	var rest []*replica
	for _, r := range b.replicas {
		if r.proc != nil && !named[r.id] {
			rest = append(rest, r)
		}
	}
	if len(rest) > 0 {
		b.log.Info("stopping the replicas cleanPodPolicy would keep on a cluster: local processes end with trainstep",
			zap.Int("replicas", len(rest)))
		b.stop(rest)
	}
}

// stop stops the replicas' processes in parallel and waits for them.
func (b *backend) stop(replicas []*replica) {
	var wg sync.WaitGroup
	for _, r := range replicas {
		p := r.proc
		if p == nil {
			continue
		}
		b.log.Info("stopping replica", zap.Stringer("replica", r.id), zap.Int("pgid", p.pgid))
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop(r.grace)
		}()
	}
	wg.Wait()
}

func (b *backend) processCount() int {
	n := 0
	for _, r := range b.replicas {
		if !r.slot {
			n++
		}
	}
	return n
}

func uniq(items []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range items {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// plainVars are the variables a framework adds to every process.
func plainVars(env []corev1.EnvVar) []envVar {
	out := make([]envVar, len(env))
	for i, v := range env {
		out[i] = envVar{name: v.Name, value: v.Value}
	}
	return out
}

// renderedConfigMaps is the data of the ConfigMaps the job's pods read on a
// cluster, by name.
func renderedConfigMaps(job *v1alpha1.TrainJob, namespace string) (map[string]map[string]string, error) {
	configMaps, err := frameworks.ConfigMaps(job, frameworks.Placement{JobName: job.Name, Namespace: namespace})
	if err != nil {
		return nil, result.Invalid(result.ReasonInvalidSpec, err)
	}
	data := map[string]map[string]string{}
	for _, cm := range configMaps {
		data[cm.Name] = cm.Data
	}
	return data, nil
}

// reportSettling logs, once per wait, that a failure waits for a peer's
// earlier exit before the job restarts: the cause of a collective job's
// failure is the replica that ended first.
func (b *backend) reportSettling(settling time.Duration) {
	if settling > 0 && !b.settling {
		b.log.Info(fmt.Sprintf("a replica failed: waiting up to %s for a peer's earlier exit before deciding what restarts", settling.Round(time.Second)))
	}
	b.settling = settling > 0
}
