package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainstep/trainstep/internal/procfs"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/backend/local/proctest"
	"github.com/trainstep/trainstep/pkg/policy"
)

// The test binary is its own supervisor, as trainstep is in production.
const superviseArg = "supervise-for-test"

var testSupervisor = []string{"/proc/self/exe", superviseArg}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == superviseArg {
		os.Exit(Supervise(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// startShell starts script with sh, under the test supervisor or not.
func startShell(t *testing.T, script string, supervisor []string) *process {
	t.Helper()
	p, err := startProcess([]string{"sh", "-c", script}, os.Environ(), nil, supervisor)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			signalGroup(p.pgid, syscall.SIGKILL)
			<-p.exited
		}
	})
	return p
}

// requireSetsid is for the tests whose command starts a process that
// leaves its session, as a daemonizing trainer does.
func requireSetsid(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("setsid"); err != nil {
		testutil.PrerequisiteMissing(t, "needs setsid(1) (Debian: util-linux) to start a process that leaves its session: %v", err)
	}
}

func waitExited(t *testing.T, p *process, within time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		t.Fatalf("process %d did not end within %s", p.pid, within)
	}
}

// escapeePIDs waits until file holds count pids, one a line.
func escapeePIDs(t *testing.T, file string, count int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(file)
		var pids []int
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		if len(pids) >= count {
			t.Cleanup(func() {
				for _, pid := range pids {
					if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "sleep" {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not get %d pids within 10s", file, count)
	return nil
}

// assertGone fails for every pid still alive after a moment.
func assertGone(t *testing.T, pgid int, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	alive := func() []int {
		live := procfs.LiveInGroup(pgid)
		for _, pid := range pids {
			if proctest.Alive(pid) {
				live = append(live, pid)
			}
		}
		return live
	}
	for time.Now().Before(deadline) && len(alive()) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if live := alive(); len(live) > 0 {
		t.Errorf("still alive: %v (group %d)", live, pgid)
	}
}

func TestSupervisedExitStatusIsTheCommands(t *testing.T) {
	cases := []struct {
		script   string
		wantCode int32
		signal   syscall.Signal // the supervisor dies by it too; 0: it exits
	}{
		{"exit 0", 0, 0},
		{"exit 3", 3, 0},
		{"kill -TERM $$", 143, syscall.SIGTERM},
		{"kill -KILL $$", 137, syscall.SIGKILL},
		// The Go runtime would turn these into exit code 2.
		{"kill -SEGV $$", 139, syscall.SIGSEGV},
		{"kill -ABRT $$", 134, syscall.SIGABRT},
	}
	for _, tc := range cases {
		t.Run(tc.script, func(t *testing.T) {
			direct := startShell(t, tc.script, nil)
			supervised := startShell(t, tc.script, testSupervisor)
			if supervised.supervisor == 0 || supervised.pid == supervised.supervisor {
				t.Fatalf("supervisor pid %d, replica pid %d: not started under a supervisor", supervised.supervisor, supervised.pid)
			}
			waitExited(t, direct, 10*time.Second)
			waitExited(t, supervised, 10*time.Second)
			if direct.exitCode != tc.wantCode || supervised.exitCode != tc.wantCode {
				t.Errorf("exit code %d directly and %d supervised, want %d", direct.exitCode, supervised.exitCode, tc.wantCode)
			}
			status := supervised.cmd.ProcessState.Sys().(syscall.WaitStatus)
			if tc.signal == 0 && (!status.Exited() || int32(status.ExitStatus()) != tc.wantCode) {
				t.Errorf("the supervisor ended with %v, want exit %d", status, tc.wantCode)
			}
			if tc.signal != 0 && (!status.Signaled() || status.Signal() != tc.signal) {
				t.Errorf("the supervisor ended with %v (exited %v, code %d), want death by %v", status, status.Exited(), status.ExitStatus(), tc.signal)
			}
		})
	}
}

// TestSupervisorEndsEverythingWhenTrainstepIsGone closes trainstep's end
// of the lifeline, as the kernel does when trainstep dies of SIGKILL.
func TestSupervisorEndsEverythingWhenTrainstepIsGone(t *testing.T) {
	requireSetsid(t)
	file := filepath.Join(t.TempDir(), "escapees")
	p := startShell(t, fmt.Sprintf(`trap "" TERM; sleep 300 & setsid sleep 301 & echo $! > %s; wait`, file), testSupervisor)
	escapees := escapeePIDs(t, file, 1)

	p.lifeline.Close()
	waitExited(t, p, 10*time.Second)
	assertGone(t, p.pgid, escapees)
	if p.exitCode != 137 {
		t.Errorf("exit code %d, want 137", p.exitCode)
	}
}

// TestSupervisedCommandLeavesNothingWhenItExits: a container's end ends
// every process in it, also those that left its process group.
func TestSupervisedCommandLeavesNothingWhenItExits(t *testing.T) {
	requireSetsid(t)
	file := filepath.Join(t.TempDir(), "escapees")
	p := startShell(t, fmt.Sprintf(`setsid sleep 301 & echo $! > %s; sleep 300 & sleep 0.2; exit 4`, file), testSupervisor)
	escapees := escapeePIDs(t, file, 1)

	waitExited(t, p, 10*time.Second)
	assertGone(t, p.pgid, escapees)
	if p.exitCode != 4 {
		t.Errorf("exit code %d, want 4", p.exitCode)
	}
}

func TestSupervisorForwardsSignalsToTheCommandsGroup(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ready")
	p := startShell(t, fmt.Sprintf(`trap 'exit 7' USR1; touch %s; sleep 300 & wait`, file), testSupervisor)
	deadline := time.Now().Add(10 * time.Second)
	for _, err := os.Stat(file); err != nil && time.Now().Before(deadline); _, err = os.Stat(file) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(p.supervisor, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitExited(t, p, 10*time.Second)
	if p.exitCode != 7 {
		t.Errorf("exit code %d, want 7 from the command's USR1 trap", p.exitCode)
	}
}

func TestSupervisedCommandThatCannotStartIsAStartError(t *testing.T) {
	notAProgram := filepath.Join(t.TempDir(), "not-a-program")
	if err := os.WriteFile(notAProgram, []byte{0, 1, 2, 3}, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, supervisor := range [][]string{nil, testSupervisor} {
		_, err := startProcess([]string{notAProgram}, os.Environ(), nil, supervisor)
		if err == nil || !strings.Contains(err.Error(), "exec format error") {
			t.Errorf("supervisor %v: error %v, want the exec format error", supervisor, err)
		}
	}
}

// TestKillProcessGroupsKillsWhatIgnoresSIGTERM must not run in parallel
// with other tests: it kills every group the package started.
func TestKillProcessGroupsKillsWhatIgnoresSIGTERM(t *testing.T) {
	for _, supervisor := range [][]string{nil, testSupervisor} {
		p := startShell(t, `trap "" TERM; sleep 300 & wait`, supervisor)
		time.Sleep(100 * time.Millisecond) // the shell has started its sleep
		KillProcessGroups()
		waitExited(t, p, 10*time.Second)
		assertGone(t, p.pgid, nil)
	}
}

// TestRunUnderASupervisor runs a whole job with supervised replicas.
func TestRunUnderASupervisor(t *testing.T) {
	job := loadJob(t, shellJob("supervised", "{failurePolicy: {restart: Replica}}", shellReplicas{"Worker", 2, "OnFailure", failOnce(t.TempDir(), "exit 3"), ""}))
	// Both workers decide success: with worker 0 alone, the job could end
	// before worker 1's restart began.
	job.Spec.SuccessPolicy = v1alpha1.SuccessPolicyAllWorkers
	r := runJob(t, context.Background(), job, func(o *Options) { o.Supervisor = testSupervisor })
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.outcome.Decision; d.Outcome != policy.OutcomeSucceeded {
		t.Fatalf("decision %s/%s (%s), want Succeeded", d.Outcome, d.Reason, d.Message)
	}
	started := r.logs.FilterMessage("replica started").All()
	if len(started) != 4 {
		t.Fatalf("%d starts, want 4 (two workers, each restarted once)", len(started))
	}
	for _, e := range started {
		if _, ok := e.ContextMap()["supervisorPid"]; !ok {
			t.Errorf("replica started without a supervisor: %v", e.ContextMap())
		}
	}
	if w := r.outcome.View.Replica(worker0); w.Restarts != 1 {
		t.Errorf("Worker/0 restarts = %d, want 1 after its exit 3", w.Restarts)
	}
	proctest.AssertNoneLeft(t, r.pgids())
}
