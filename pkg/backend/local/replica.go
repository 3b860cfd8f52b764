package local

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/policy"
)

// maxTerminationMessage is how much of a termination message is read, as
// the kubelet reads at most the last 4096 bytes of /dev/termination-log.
const maxTerminationMessage = 4096

// replica is one replica's plan and the state of its current instance:
// what a pod's status says on a cluster.
type replica struct {
	*plan
	spec *v1alpha1.ReplicaSpec

	attempt  int
	phase    policy.Phase
	exitCode *int32
	message  string
	// restarts counts in-place restarts of the current instance;
	// restartsBefore those of the instances it replaced; free the
	// recreations the failure policy did not count.
	restarts, restartsBefore, free int32
	// finishedAt is when the current instance's process ended.
	finishedAt time.Time

	proc       *process
	generation int
	startedAt  time.Time
	// startAt, when set, is when the process is due to (re)start.
	startAt time.Time
	// delay is the wait before the next restart.
	delay time.Duration
	// tail keeps the end of the output of a replica that is not streamed,
	// to show when it fails.
	tail *logs.Tail
}

// startDue starts every replica whose start time has come.
func (b *backend) startDue() {
	now := b.opts.Clock.Now()
	for _, r := range b.replicas {
		if !r.startAt.IsZero() && !now.Before(r.startAt) {
			r.startAt = time.Time{}
			b.launch(r)
		}
	}
}

// launch starts a new process for r, with an empty termination log as a
// new container has.
func (b *backend) launch(r *replica) {
	r.generation++
	// The job's attempt, and this replica's recreations within the job.
	log := b.log.With(zap.Stringer("replica", r.id), zap.Int("attempt", b.jobAttempt), zap.Int("replicaAttempt", r.attempt),
		zap.Int32("restarts", r.restarts))
	if err := os.WriteFile(r.terminationLog, nil, 0o644); err != nil {
		log.Warn("clearing the termination message file", zap.Error(err))
	}
	var out io.WriteCloser
	if r.prefix != "" {
		out = b.prefixer.Writer(r.prefix)
	} else {
		r.tail = logs.NewTail(logs.FailedTailLines)
		out = r.tail
	}
	p, err := startProcess(r.argv, r.env, out, b.opts.Supervisor)
	if err != nil {
		log.Error("starting replica", zap.String("command", describeCommand(r.argv)), zap.Error(err))
		b.pending = append(b.pending, exit{replica: r, generation: r.generation, code: exitCodeStartError})
		return
	}
	r.proc, r.phase, r.startedAt = p, policy.PhaseRunning, b.opts.Clock.Now()
	fields := []zap.Field{zap.Int("pid", p.pid), zap.Int("pgid", p.pgid), zap.String("command", describeCommand(r.argv))}
	if rank, ok := rankOf(r.env); ok && rank != fmt.Sprint(r.id.Index) {
		// [worker-1] is the replica's index; the framework numbers it otherwise.
		fields = append(fields, zap.String("rank", rank))
	}
	if p.supervisor != 0 {
		fields = append(fields, zap.Int("supervisorPid", p.supervisor))
	}
	log.Info("replica started", fields...)
	generation := r.generation
	go func() {
		<-p.exited
		select {
		case b.exits <- exit{replica: r, generation: generation, code: p.exitCode}:
		case <-b.done:
		}
	}()
}

// exited records the end of a replica's process. A restart policy that
// restarts in place (OnFailure, Always) schedules the restart, as a
// kubelet does; otherwise the replica has ended and the policy decides.
func (b *backend) exited(e exit) {
	r := e.replica
	if e.generation != r.generation {
		return
	}
	now := b.opts.Clock.Now()
	r.proc = nil
	code := e.code
	r.exitCode, r.finishedAt = &code, now
	if !r.startedAt.IsZero() && now.Sub(r.startedAt) >= backoffResetAfter {
		r.delay = 0
	}
	log := b.log.With(zap.Stringer("replica", r.id), zap.Int32("exitCode", code))
	if code != 0 && r.tail != nil {
		b.showTail(r, log)
	}
	if policy.RestartsInPlace(frameworks.InPlaceRestartPolicy(b.job, r.id.Type), code) {
		r.restarts++
		r.message = ""
		r.startAt = now.Add(b.nextDelay(r))
		log.Info("replica exited; restarting it in place", zap.Int32("restarts", r.restarts), zap.Duration("after", r.startAt.Sub(now)))
		return
	}
	r.message = readTerminationMessage(r.terminationLog)
	r.phase = policy.PhaseFailed
	if code == 0 {
		r.phase = policy.PhaseSucceeded
	}
	log.Info("replica exited", zap.String("phase", string(r.phase)))
}

// recreate replaces each replica with a new instance (attempt + 1), as
// the controller replaces a pod; each counts as one restart of the job
// when counted (a failure policy rule's Ignore is free).
func (b *backend) recreate(ids []policy.ReplicaID, counted bool) {
	now := b.opts.Clock.Now()
	for _, id := range ids {
		r := b.byID[id]
		if r == nil || r.slot {
			continue
		}
		if r.proc != nil {
			b.stop([]*replica{r})
			r.proc = nil
		}
		r.generation++ // the old instance's exit is stale now
		if counted {
			b.recreations++
		} else {
			r.free++
		}
		r.restartsBefore += r.restarts
		r.restarts, r.attempt = 0, r.attempt+1
		r.phase, r.exitCode, r.message, r.finishedAt = policy.PhasePending, nil, "", time.Time{}
		r.startAt = now.Add(b.nextDelay(r))
		b.log.Info("recreating replica", zap.Stringer("replica", id), zap.Int("attempt", r.attempt), zap.Bool("counted", counted),
			zap.Duration("after", r.startAt.Sub(now)))
	}
}

// restartJob stops every replica and starts them all again, as the
// controller does for a job that restarts as a whole: the replicas that
// ended meanwhile followed the cause and cost nothing.
func (b *backend) restartJob(jr *policy.JobRestart) {
	b.jobAttempt++
	if jr.Counted {
		b.jobRestarts++
	}
	b.log.Info(fmt.Sprintf("restarting the job (attempt %d): %s", b.jobAttempt+1, jr.Why), zap.Bool("counted", jr.Counted))
	var running []*replica
	for _, r := range b.replicas {
		if r.proc != nil {
			running = append(running, r)
		}
	}
	b.stop(running)
	now := b.opts.Clock.Now()
	delay := b.opts.RestartDelay
	for _, r := range b.replicas {
		if r.slot {
			continue
		}
		r.proc = nil
		r.generation++
		r.restartsBefore += r.restarts
		r.restarts = 0
		r.phase, r.exitCode, r.message, r.finishedAt = policy.PhasePending, nil, "", time.Time{}
		r.startAt = now.Add(delay)
	}
}

// nextDelay returns the wait before r's next start and doubles it.
func (b *backend) nextDelay(r *replica) time.Duration {
	if r.delay == 0 {
		r.delay = b.opts.RestartDelay
	}
	d := r.delay
	r.delay = min(2*r.delay, max(maxRestartDelay, b.opts.RestartDelay))
	return d
}

// view is the job as the policy sees it.
func (b *backend) view() policy.View {
	v := policy.View{Job: b.job, StartTime: b.start, Now: b.opts.Clock.Now(), Restarts: b.recreations + b.jobRestarts}
	var driver *replica
	if rt, ok := frameworks.Driver(b.job); ok {
		driver = b.byID[policy.ReplicaID{Type: rt, Index: 0}]
	}
	for _, r := range b.replicas {
		replica := policy.Replica{
			ReplicaID: r.id, Attempt: r.attempt, Phase: r.phase, ExitCode: r.exitCode,
			Restarts: r.restarts, TerminationMessage: r.message, Node: b.hostname,
			EarlierRestarts: int32(r.attempt) - r.free + r.restartsBefore, FinishedAt: r.finishedAt,
		}
		if r.slot {
			replica = policy.Replica{ReplicaID: r.id, Phase: slotPhase(driver), Node: b.hostname}
		}
		v.Restarts += r.restarts + r.restartsBefore
		v.Replicas = append(v.Replicas, replica)
	}
	return v
}

// slotPhase is the phase of a replica that is a slot of the driver's (an
// MPI worker of the launcher's hostfile): busy while the driver (mpirun)
// runs and done when it succeeded. A failed driver leaves the slots
// unused, not failed: the driver's failure is the job's.
func slotPhase(launcher *replica) policy.Phase {
	if launcher == nil {
		return policy.PhaseMissing
	}
	switch launcher.phase {
	case policy.PhaseRunning, policy.PhaseSucceeded, policy.PhasePending:
		return launcher.phase
	}
	return policy.PhaseMissing
}

// readTerminationMessage reads what the process left as its termination
// message: its last maxTerminationMessage bytes, as the kubelet keeps them.
func readTerminationMessage(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(data) > maxTerminationMessage {
		data = data[len(data)-maxTerminationMessage:]
	}
	return string(data)
}

// showTail prints the last lines of a failed replica whose output was not
// streamed, so a failure is never silent whatever the log mode.
func (b *backend) showTail(r *replica, log *zap.Logger) {
	log.Warn("replica failed; its last lines follow", zap.Int("lines", logs.FailedTailLines))
	w := b.prefixer.Writer(logs.ReplicaPrefix(string(r.id.Type), r.id.Index))
	_, _ = r.tail.WriteTo(w)
	_ = w.Close()
}

// envRank is the variable PyTorch's and XGBoost's processes read their
// rank from.
const envRank = "RANK"

// rankOf is the framework's rank of a replica (RANK, as PyTorch sets it)
// when its environment holds one.
func rankOf(env []string) (string, bool) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, envRank+"="); ok {
			return v, true
		}
	}
	return "", false
}
