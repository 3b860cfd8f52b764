package local

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/trainstep/trainstep/pkg/backend/local/proctest"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
)

// failOnce is a script that ends the first run of each replica with
// firstRun and succeeds when started again. ("$$" in a command is "$"
// after the kubelet's expansion, so a script's own PID is "$$$$".)
func failOnce(dir, firstRun string) string {
	marker := filepath.Join(dir, "ran-$TRAINSTEP_REPLICA_TYPE-$TRAINSTEP_REPLICA_INDEX")
	return fmt.Sprintf(`if [ ! -e %s ]; then touch %s; %s; fi; exit 0`, marker, marker, firstRun)
}

// failOnceFirstWorker ends worker 0's first run with firstRun; the other
// workers run a moment and succeed, as ranks around a failed one would be
// stopped by the job's restart.
func failOnceFirstWorker(dir, firstRun string) string {
	marker := filepath.Join(dir, "ran-0")
	return fmt.Sprintf(`if [ "$TRAINSTEP_REPLICA_INDEX" = 0 ] && [ ! -e %s ]; then touch %s; %s; fi; sleep 0.3; exit 0`, marker, marker, firstRun)
}

func TestRestartsFollowTheRestartPolicy(t *testing.T) {
	// Workers only: a MultiWorkerMirrored job, which restarts as a whole
	// unless its failure policy says Replica.
	const perReplica = "{failurePolicy: {restart: Replica}}"
	cases := []struct {
		name, runPolicy, restartPolicy, extra, firstRun string
		wantPhase                                       policy.Outcome
		wantReason                                      string
		wantRestarts                                    int32 // the job's restarts (backoffLimit's count)
		wantAttempt                                     int   // Worker/0's recreations
		wantFirstExit                                   int32 // of whichever worker exits first
	}{
		{"OnFailure restarts an exit 3 in place", perReplica, "OnFailure", "", "exit 3", policy.OutcomeSucceeded, result.ReasonSucceeded, 2, 0, 3},
		{"OnFailure restarts a SIGKILLed process in place", perReplica, "OnFailure", "", "kill -KILL $$$$", policy.OutcomeSucceeded, result.ReasonSucceeded, 2, 0, 137},
		{"ExitCode recreates a retryable exit", perReplica, "ExitCode", "      retryableExitCodes: [75]\n", "exit 75", policy.OutcomeSucceeded, result.ReasonSucceeded, 2, 1, 75},
		{"ExitCode recreates a process killed by a signal", perReplica, "ExitCode", "", "kill -KILL $$$$", policy.OutcomeSucceeded, result.ReasonSucceeded, 2, 1, 137},
		{"ExitCode fails on exit 3", perReplica, "ExitCode", "", "exit 3", policy.OutcomeFailed, result.ReasonReplicaFailed, 0, 0, 3},
		{"Never fails on the first exit 1", perReplica, "Never", "", "exit 1", policy.OutcomeFailed, result.ReasonReplicaFailed, 0, 0, 1},
		// Both workers fail at once: the job restarts once, as a whole.
		{"restart Job: OnFailure restarts the job once", "", "OnFailure", "", "exit 3", policy.OutcomeSucceeded, result.ReasonSucceeded, 1, 0, 3},
		{"restart Job: ExitCode restarts the job once for a SIGKILL", "", "ExitCode", "", "kill -KILL $$$$", policy.OutcomeSucceeded, result.ReasonSucceeded, 1, 0, 137},
		{"restart Job: ExitCode fails on exit 3 without restarting", "", "ExitCode", "", "exit 3", policy.OutcomeFailed, result.ReasonReplicaFailed, 0, 0, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := failOnce(t.TempDir(), tc.firstRun)
			if tc.runPolicy == "" {
				script = failOnceFirstWorker(t.TempDir(), tc.firstRun)
			}
			job := loadJob(t, shellJob("restarts", tc.runPolicy, shellReplicas{"Worker", 2, tc.restartPolicy, script, tc.extra}))
			r := runJob(t, t.Context(), job, nil)
			if r.err != nil {
				t.Fatal(r.err)
			}
			d := r.outcome.Decision
			if d.Outcome != tc.wantPhase || d.Reason != tc.wantReason {
				t.Fatalf("decision = %s/%s (%s), want %s/%s", d.Outcome, d.Reason, d.Message, tc.wantPhase, tc.wantReason)
			}
			if got := r.outcome.View.Restarts; got != tc.wantRestarts {
				t.Errorf("job restarts = %d, want %d", got, tc.wantRestarts)
			}
			w0 := r.outcome.View.Replica(worker0)
			if w0.Attempt != tc.wantAttempt {
				t.Errorf("Worker/0 attempt = %d, want %d", w0.Attempt, tc.wantAttempt)
			}
			exits := r.logs.FilterMessageSnippet("exited").All()
			if len(exits) == 0 || exits[0].ContextMap()["exitCode"] != tc.wantFirstExit {
				t.Errorf("first exit = %v, want exit code %d", exits, tc.wantFirstExit)
			}
			proctest.AssertNoneLeft(t, r.pgids())
		})
	}
}

func TestAFailedReplicaFailsTheJobAndStopsTheOthers(t *testing.T) {
	// Worker/1 fails fast; PS/0 and Worker/0 would run for a minute.
	script := `if [ "$TRAINSTEP_REPLICA_INDEX" = 1 ] && [ "$TRAINSTEP_REPLICA_TYPE" = worker ]; then sleep 0.3; exit 1; fi; exec sleep 60`
	job := loadJob(t, shellJob("fails", "", shellReplicas{"PS", 1, "Never", script, ""}, shellReplicas{"Worker", 2, "Never", script, ""}))
	started := time.Now()
	r := runJob(t, t.Context(), job, nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	d := r.outcome.Decision
	if d.Outcome != policy.OutcomeFailed || d.Reason != result.ReasonReplicaFailed || !strings.Contains(d.Message, "Worker/1 failed with exit code 1") {
		t.Errorf("decision = %s/%s %q, want Failed/ReplicaFailed naming Worker/1 and exit code 1", d.Outcome, d.Reason, d.Message)
	}
	if took := time.Since(started); took > 10*time.Second {
		t.Errorf("the run took %s: the other replicas were not stopped", took)
	}
	for _, id := range []policy.ReplicaID{ps0, worker0} {
		if r.logs.FilterMessage("stopping replica").FilterField(fieldReplica(id)).Len() != 1 {
			t.Errorf("%s was not stopped", id)
		}
	}
	proctest.AssertNoneLeft(t, r.pgids())
}

func TestBackoffLimitBoundsRestartsInPlace(t *testing.T) {
	job := loadJob(t, shellJob("crashloop", "{backoffLimit: 2}", shellReplicas{"Worker", 1, "OnFailure", "exit 1", ""}))
	r := runJob(t, t.Context(), job, nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.outcome.Decision; d.Reason != result.ReasonBackoffLimitExceeded {
		t.Fatalf("decision = %s/%s, want BackoffLimitExceeded", d.Outcome, d.Reason)
	}
	// Restarts 1 and 2 are allowed; the third needed one fails the job.
	if starts := r.logs.FilterMessage("replica started").Len(); starts != 3 {
		t.Errorf("the worker was started %d times, want 3", starts)
	}
}

func TestActiveDeadlineEndsTheJob(t *testing.T) {
	job := loadJob(t, shellJob("slow", "{activeDeadlineSeconds: 1}", shellReplicas{"Worker", 2, "Never", "exec sleep 60", ""}))
	started := time.Now()
	r := runJob(t, t.Context(), job, nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.outcome.Decision; d.Reason != result.ReasonDeadlineExceeded {
		t.Fatalf("decision = %s/%s, want DeadlineExceeded", d.Outcome, d.Reason)
	}
	if took := time.Since(started); took < time.Second || took > 8*time.Second {
		t.Errorf("the job ended after %s, want about 1s", took)
	}
	proctest.AssertNoneLeft(t, r.pgids())
}

func TestCancellingStopsEveryProcessGroup(t *testing.T) {
	// Each replica ignores SIGTERM and has children of its own, so only
	// SIGKILL to the whole group ends it.
	script := `trap '' TERM; sleep 600 & sleep 600 & wait`
	job := loadJob(t, shellJob("stubborn", "", shellReplicas{"PS", 1, "OnFailure", script, ""}, shellReplicas{"Worker", 2, "OnFailure", script, ""}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan run, 1)
	var r run
	go func() {
		done <- runJob(t, ctx, job, func(o *Options) {
			o.MaxStopGrace = 500 * time.Millisecond
			o.OnView = func(v *policy.View) {
				if running(v) == 3 {
					time.AfterFunc(300*time.Millisecond, cancel) // let the children start
				}
			}
		})
	}()
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the run did not end after its context was cancelled")
	}
	if !r.outcome.Terminated {
		t.Errorf("outcome = %+v, want Terminated", r.outcome.Decision)
	}
	if pgids := r.pgids(); len(pgids) != 3 {
		t.Errorf("%d process groups started, want 3", len(pgids))
	}
	proctest.AssertNoneLeft(t, r.pgids())
}

func TestSucceededReplicaLeavesNothingBehindAndItsMessageIsKept(t *testing.T) {
	// Worker/0 leaves a child holding its output open; the child must die
	// with it, as in a container, and not hold up the run.
	script := `sleep 600 & echo '{"loss": 0.5}' > "$TRAINSTEP_TERMINATION_MESSAGE_PATH"; echo done; exit 0`
	job := loadJob(t, shellJob("message", "", shellReplicas{"Worker", 1, "Never", script, ""}))
	started := time.Now()
	r := runJob(t, t.Context(), job, nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.outcome.Decision; d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision = %s/%s %s", d.Outcome, d.Reason, d.Message)
	}
	if got := r.outcome.View.Replica(worker0).TerminationMessage; strings.TrimSpace(got) != `{"loss": 0.5}` {
		t.Errorf("termination message = %q", got)
	}
	if took := time.Since(started); took >= outputDrain {
		t.Errorf("the run took %s: the child holding the output was not killed with its process", took)
	}
	if !strings.Contains(r.output.String(), "[worker-0] done\n") {
		t.Errorf("output %q lacks the prefixed line", r.output.String())
	}
	proctest.AssertNoneLeft(t, r.pgids())
}

func TestLogModesSelectReplicas(t *testing.T) {
	cases := []struct {
		mode      string
		want, not []string
	}{
		{"leaders", []string{"[worker-0] hello from worker 0\n"}, []string{"worker-1", "ps-0"}},
		{"all", []string{"[worker-0] hello from worker 0\n", "[worker-1] hello from worker 1\n", "[ps-0] hello from ps 0\n"}, nil},
		{"none", nil, []string{"hello"}},
	}
	// Workers linger so the ps has said hello before the job ends.
	script := `echo "hello from $TRAINSTEP_REPLICA_TYPE $TRAINSTEP_REPLICA_INDEX"`
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			job := loadJob(t, shellJob("hello", "", shellReplicas{"PS", 1, "Never", script, ""}, shellReplicas{"Worker", 2, "Never", script + "; sleep 0.5", ""}))
			r := runJob(t, t.Context(), job, func(o *Options) { o.Logs = logs.Mode(tc.mode) })
			out := r.output.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestMPIWorkerSlotsFollowTheLauncher(t *testing.T) {
	job := loadJob(t, strings.Replace(mpiJob, "command: [mpirun, --hostfile, /etc/mpi/hostfile, -np, \"6\", pi]", `command: [sh, -c, "cat $OMPI_MCA_orte_default_hostfile"]`, 1))
	r := runJob(t, t.Context(), job, func(o *Options) { o.Logs = logs.ModeAll })
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.outcome.Decision; d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision = %s/%s %s", d.Outcome, d.Reason, d.Message)
	}
	for _, id := range []policy.ReplicaID{worker0, worker1} {
		if phase := r.outcome.View.Replica(id).Phase; phase != policy.PhaseSucceeded {
			t.Errorf("%s = %s, want Succeeded with the launcher", id, phase)
		}
	}
	if started := r.logs.FilterMessage("replica started").Len(); started != 1 {
		t.Errorf("%d processes started, want only the launcher", started)
	}
	if !strings.Contains(r.output.String(), "[launcher-0] localhost slots=6\n") {
		t.Errorf("the launcher did not read the local hostfile: %q", r.output.String())
	}
}

func running(v *policy.View) int {
	n := 0
	for _, r := range v.Replicas {
		if r.Phase == policy.PhaseRunning {
			n++
		}
	}
	return n
}

func fieldReplica(id policy.ReplicaID) zapcore.Field { return zap.Stringer("replica", id) }
