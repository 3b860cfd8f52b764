package executor

import (
	"bufio"
	"encoding/json"
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
	"github.com/trainstep/trainstep/pkg/backend/local/proctest"
)

// stubbornJob is a job of two workers whose command ignores SIGTERM and
// leaves two grandchildren: one in its process group that ignores SIGTERM
// too, and one that moved to a session of its own (setsid) and whose pid
// is appended to escapees.
func stubbornJob(escapees string) string {
	script := fmt.Sprintf(`trap "" TERM; sleep 300 & setsid sleep 301 & echo $! >> %s; wait`, escapees)
	return fmt.Sprintf(`apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: stubborn}
spec:
  framework: tensorflow
  replicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          terminationGracePeriodSeconds: 30
          containers:
          - name: tensorflow
            image: busybox
            command: [sh, -c, %s]
`, strconv.Quote(script))
}

// stubbornRun is the trainstep binary running stubbornJob, read until
// both workers and their grandchildren run.
type stubbornRun struct {
	cmd      *exec.Cmd
	lines    *bufio.Scanner
	pgids    []int
	escapees []int
}

func startStubbornRun(t *testing.T) *stubbornRun {
	t.Helper()
	if _, err := exec.LookPath("setsid"); err != nil {
		testutil.PrerequisiteMissing(t, "needs setsid(1) (Debian: util-linux) to start a process that leaves its session: %v", err)
	}
	bin := buildCommands(t, "trainstep")
	dir := t.TempDir()
	escapees := filepath.Join(dir, "escapees")
	jobFile := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(jobFile, []byte(stubbornJob(escapees)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "trainstep"), "run", "--local", "-f", jobFile, "--outputs-dir", filepath.Join(dir, "outputs"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &stubbornRun{cmd: cmd, lines: bufio.NewScanner(stderr)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, pid := range r.escapees { // whatever a failed test left
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "sleep" {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	r.pgids = r.readUntil(t, "replica started", 2)
	deadline := time.Now().Add(10 * time.Second)
	for len(r.escapees) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		data, _ := os.ReadFile(escapees)
		r.escapees = r.escapees[:0]
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				r.escapees = append(r.escapees, pid)
			}
		}
	}
	if len(r.escapees) != 2 {
		t.Fatalf("the workers did not start their grandchildren: escapees %v", r.escapees)
	}
	return r
}

// readUntil reads trainstep's JSON log until msg has appeared count times
// and returns the pgid field of those lines.
func (r *stubbornRun) readUntil(t *testing.T, msg string, count int) []int {
	t.Helper()
	var pgids []int
	var log strings.Builder
	for len(pgids) < count && r.lines.Scan() {
		log.WriteString(r.lines.Text() + "\n")
		var entry struct {
			Msg  string `json:"msg"`
			Pgid int    `json:"pgid"`
		}
		if json.Unmarshal(r.lines.Bytes(), &entry) == nil && entry.Msg == msg {
			pgids = append(pgids, entry.Pgid)
		}
	}
	if len(pgids) < count {
		t.Fatalf("trainstep logged %q %d times, want %d:\n%s", msg, len(pgids), count, log.String())
	}
	return pgids
}

// wait waits for trainstep to exit and returns its exit code.
func (r *stubbornRun) wait(t *testing.T) int {
	t.Helper()
	go func() { // keep the pipe drained
		for r.lines.Scan() {
		}
	}()
	waited := make(chan error, 1)
	go func() { waited <- r.cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("trainstep did not exit within 30s")
	}
	return r.cmd.ProcessState.ExitCode()
}

// assertNothingLeft gives the processes a moment to die, then fails for
// every live process of the replicas' groups and every live escapee.
func (r *stubbornRun) assertNothingLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && r.anyLeft() {
		time.Sleep(50 * time.Millisecond)
	}
	proctest.AssertNoneLeft(t, r.pgids)
	for _, pid := range r.escapees {
		if proctest.Alive(pid) {
			t.Errorf("grandchild %d, which left its replica's process group, still runs", pid)
		}
	}
}

func (r *stubbornRun) anyLeft() bool {
	for _, pgid := range r.pgids {
		if len(procfs.LiveInGroup(pgid)) > 0 {
			return true
		}
	}
	for _, pid := range r.escapees {
		if proctest.Alive(pid) {
			return true
		}
	}
	return false
}

// TestSecondInterruptLeavesNoProcessBehind presses Ctrl-C twice: the
// second one exits at once, while the stop waits out the grace period of
// replicas that ignore SIGTERM.
func TestSecondInterruptLeavesNoProcessBehind(t *testing.T) {
	r := startStubbornRun(t)
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r.readUntil(t, "stopping replica", 2) // now waiting out the 30 s grace
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code := r.wait(t); code != 13 {
		t.Errorf("trainstep exited %d after the second SIGINT, want 13", code)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("trainstep took %s to exit after the second SIGINT", took)
	}
	r.assertNothingLeft(t)
}

// TestKilledTrainstepLeavesNoProcessBehind kills trainstep with SIGKILL,
// which nothing in trainstep can handle.
func TestKilledTrainstepLeavesNoProcessBehind(t *testing.T) {
	r := startStubbornRun(t)
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	r.assertNothingLeft(t)
}
