package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainstep/trainstep/internal/testutil"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/trainstep/trainstep/pkg/backend/local/proctest"
	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// moduleRoot is where the example jobs and commands live, seen from this package.
const moduleRoot = ".."

// buildCommands builds the module's commands into a fresh directory and
// puts it first on PATH, as `make demo` does.
func buildCommands(t *testing.T, commands ...string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + "/"}
	for _, c := range commands {
		args = append(args, "./cmd/"+c)
	}
	build := exec.Command("go", args...)
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %v: %v\n%s", commands, err, out)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

// localRun is one executor.Run on the local backend, its output captured.
type localRun struct {
	res        result.Result
	err        error
	stdout     string
	stderr     *testutil.SyncBuffer
	logs       *observer.ObservedLogs
	outputsDir string
	took       time.Duration
}

// logWatch is trainstep's log as a test sees it while the run goes on.
type logWatch struct {
	core zapcore.Core
	logs *observer.ObservedLogs
}

func watchLog() logWatch {
	core, logs := observer.New(zap.InfoLevel)
	return logWatch{core, logs}
}

// runLocally runs manifest with opts to its end, logging into watch.
func runLocally(t *testing.T, ctx context.Context, manifest []byte, opts spec.Options, watch logWatch) localRun {
	t.Helper()
	return runLocallyMode(t, ctx, manifest, opts, watch, logs.ModeLeaders)
}

// runLocallyMode is runLocally with replica logs in mode.
func runLocallyMode(t *testing.T, ctx context.Context, manifest []byte, opts spec.Options, watch logWatch, mode logs.Mode) localRun {
	t.Helper()
	var stdout bytes.Buffer
	r := localRun{stderr: &testutil.SyncBuffer{}, logs: watch.logs, outputsDir: t.TempDir()}
	cfg := Config{
		Spec: manifest, SpecOptions: opts, Local: true,
		OutputsDir: r.outputsDir, ProgressFile: filepath.Join(r.outputsDir, "progress"),
		Logs: mode, Logger: zap.New(watch.core), Stdout: &stdout, Stderr: r.stderr,
	}
	started := time.Now()
	r.res, r.err = Run(ctx, cfg)
	r.took, r.stdout = time.Since(started), stdout.String()
	return r
}

func (r localRun) output(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.outputsDir, name))
	if err != nil {
		t.Fatalf("reading output %s: %v", name, err)
	}
	return string(data)
}

// pgids are the process groups the run started, from its log.
func (r localRun) pgids() []int {
	var out []int
	for _, e := range r.logs.FilterMessage("replica started").All() {
		out = append(out, int(e.ContextMap()["pgid"].(int64)))
	}
	return out
}

// startedPID waits until replica (e.g. "Worker/1") has been started count
// times and returns the pid of that instance.
func startedPID(t *testing.T, observed *observer.ObservedLogs, replica string, count int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var pids []int
		for _, e := range observed.FilterMessage("replica started").All() {
			if fields := e.ContextMap(); fields["replica"] == replica {
				pids = append(pids, int(fields["pid"].(int64)))
			}
		}
		if len(pids) >= count {
			return pids[count-1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s was not started %d times within 30s", replica, count)
	return 0
}

var (
	stepLoss  = regexp.MustCompile(`(?m)^\[([a-z]+-\d+)\] step \d+ loss (\S+)$`)
	finalLoss = regexp.MustCompile(`(?m)^\[([a-z]+-\d+)\] final steps \d+ loss (\S+)$`)
	metrics   = regexp.MustCompile(`(?m)^\[([a-z]+-\d+)\] metrics (\{.*\})$`)
)

// training reads what the deciding replica logged: its first and final
// loss and the metrics it wrote to its termination message.
type training struct {
	firstLoss, finalLoss float64
	metrics              string
}

func trainingOf(t *testing.T, prefix, log string) training {
	t.Helper()
	var tr training
	for _, m := range stepLoss.FindAllStringSubmatch(log, -1) {
		if m[1] == prefix {
			tr.firstLoss, _ = strconv.ParseFloat(m[2], 64)
			break
		}
	}
	for _, m := range finalLoss.FindAllStringSubmatch(log, -1) {
		if m[1] == prefix {
			tr.finalLoss, _ = strconv.ParseFloat(m[2], 64)
		}
	}
	for _, m := range metrics.FindAllStringSubmatch(log, -1) {
		if m[1] == prefix {
			tr.metrics = m[2]
		}
	}
	if tr.firstLoss == 0 || tr.finalLoss == 0 || tr.metrics == "" {
		t.Fatalf("[%s] did not log a first loss, a final loss and its metrics:\n%s", prefix, log)
	}
	return tr
}

// sameJSON compares two JSON documents, numbers by their exact text.
func sameJSON(t *testing.T, want, got string) string {
	t.Helper()
	decode := func(s string) any {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("decoding %q: %v", s, err)
		}
		return v
	}
	return cmp.Diff(decode(want), decode(got))
}

func readExample(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot, "workflows", "jobs", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDemoJobsConvergeLocally(t *testing.T) {
	buildCommands(t, "demo-trainer")
	cases := []struct {
		file, leader string
		replicas     int
	}{
		{"demo-ps.yaml", "worker-0", 3},
		{"demo-allreduce.yaml", "master-0", 4},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			// The example's steps, paced faster than the demo's.
			r := runLocally(t, t.Context(), readExample(t, tc.file), spec.Options{Args: []string{"--step-delay=20ms"}}, watchLog())
			if r.err != nil || r.res.Phase != result.PhaseSucceeded {
				t.Fatalf("phase %s, error %v\n%s", r.res.Phase, r.err, r.stderr)
			}
			tr := trainingOf(t, tc.leader, r.stderr.String())
			if tr.finalLoss >= 0.01*tr.firstLoss {
				t.Errorf("final loss %g is not below 1%% of the first loss %g", tr.finalLoss, tr.firstLoss)
			}
			if diff := sameJSON(t, tr.metrics, r.output(t, "metrics.json")); diff != "" {
				t.Errorf("metrics.json differs from what %s wrote (-trainer +metrics.json):\n%s", tc.leader, diff)
			}
			var printed result.Result
			if err := json.Unmarshal([]byte(r.stdout), &printed); err != nil || strings.Count(r.stdout, "\n") != 1 {
				t.Errorf("stdout is not one JSON line: %q (%v)", r.stdout, err)
			}
			if printed.Phase != result.PhaseSucceeded || len(printed.Replicas) != tc.replicas {
				t.Errorf("printed result: phase %s with %d replicas, want Succeeded with %d", printed.Phase, len(printed.Replicas), tc.replicas)
			}
			if got, want := r.output(t, "progress"), strconv.Itoa(tc.replicas)+"/"+strconv.Itoa(tc.replicas); got != want {
				t.Errorf("progress file = %q, want %q", got, want)
			}
			if r.logs.FilterMessageSnippet("running, restarts 0").Len() == 0 {
				t.Errorf("no progress line was logged")
			}
			proctest.AssertNoneLeft(t, r.pgids())
		})
	}
}

func TestKilledWorkerIsRestartedAndTheJobSucceeds(t *testing.T) {
	buildCommands(t, "demo-trainer")
	ctx := t.Context()
	done := make(chan localRun, 1)
	watch := watchLog()
	go func() {
		done <- runLocally(t, ctx, readExample(t, "demo-ps.yaml"), spec.Options{Args: []string{"--step-delay=30ms"}}, watch)
	}()
	pid := startedPID(t, watch.logs, "Worker/0", 1)
	time.Sleep(time.Second) // well into training
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing Worker/0 (pid %d): %v", pid, err)
	}
	r := <-done
	if r.err != nil || r.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s, error %v\n%s", r.res.Phase, r.err, r.stderr)
	}
	if r.res.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", r.res.Restarts)
	}
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(r.output(t, "replicas.json")), &replicas); err != nil {
		t.Fatal(err)
	}
	for _, rs := range replicas {
		if rs.Type == "Worker" && rs.Index == 0 && rs.Restarts != 1 {
			t.Errorf("Worker/0 restarts in replicas.json = %d, want 1", rs.Restarts)
		}
	}
	killed := r.logs.FilterMessageSnippet("restarting it in place").All()
	if len(killed) != 1 || killed[0].ContextMap()["exitCode"] != int32(137) {
		t.Errorf("want one in-place restart after exit code 137, got %v", killed)
	}
	if diff := sameJSON(t, trainingOf(t, "worker-0", r.stderr.String()).metrics, r.output(t, "metrics.json")); diff != "" {
		t.Errorf("metrics.json differs from what the restarted worker wrote:\n%s", diff)
	}
	proctest.AssertNoneLeft(t, r.pgids())
}

// failingWorkerJob: the ps and Worker/0 train for minutes; Worker/1 exits
// 1 after a second, under restart policy Never.
const failingWorkerJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: failing}
spec:
  framework: tensorflow
  replicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers:
          - {name: tensorflow, image: trainstep, command: [demo-trainer, --steps=1000000, --step-delay=50ms]}
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: tensorflow
            image: trainstep
            command: [sh, -c, 'if [ "$TRAINSTEP_REPLICA_INDEX" = 1 ]; then sleep 1; exit 1; fi; exec demo-trainer --steps=1000000 --step-delay=50ms']
`

func TestFailedWorkerFailsTheJobAndStopsTheOthers(t *testing.T) {
	buildCommands(t, "demo-trainer")
	r := runLocally(t, t.Context(), []byte(failingWorkerJob), spec.Options{}, watchLog())
	var re *result.Error
	if !errors.As(r.err, &re) || re.Phase != result.PhaseFailed || r.res.Phase.ExitCode() != result.ExitFailed {
		t.Fatalf("phase %s (exit %d), error %v; want Failed, exit 10", r.res.Phase, r.res.Phase.ExitCode(), r.err)
	}
	if got := strings.TrimSpace(r.output(t, "reason")); got != result.ReasonReplicaFailed {
		t.Errorf("reason = %q, want %s", got, result.ReasonReplicaFailed)
	}
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(r.output(t, "replicas.json")), &replicas); err != nil {
		t.Fatal(err)
	}
	for _, rs := range replicas {
		if rs.Type == "Worker" && rs.Index == 1 && (rs.Phase != "Failed" || rs.ExitCode == nil || *rs.ExitCode != 1) {
			t.Errorf("Worker/1 in replicas.json = %+v, want Failed with exit code 1", rs)
		}
	}
	if r.took > 20*time.Second {
		t.Errorf("the run took %s: the others were not stopped", r.took)
	}
	if stopped := r.logs.FilterMessage("stopping replica").Len(); stopped != 2 {
		t.Errorf("%d replicas were stopped, want the ps and Worker/0", stopped)
	}
	proctest.AssertNoneLeft(t, r.pgids())
}

// TestInterruptLeavesNoProcessBehind runs trainstep as a user does and
// presses Ctrl-C (SIGINT) while the demo trains.
func TestInterruptLeavesNoProcessBehind(t *testing.T) {
	bin := buildCommands(t, "trainstep", "demo-trainer")
	outputs := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "trainstep"), "run", "--local", "-f", filepath.Join(moduleRoot, "workflows", "jobs", "demo-ps.yaml"),
		"--outputs-dir", outputs, "--logs", "all", "--arg=--steps=1000000")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	// Read trainstep's JSON log until every replica runs, noting the groups.
	var pgids []int
	var log strings.Builder
	lines := bufio.NewScanner(stderr)
	allRunning := false
	for !allRunning && lines.Scan() {
		line := lines.Text()
		log.WriteString(line + "\n")
		var entry struct {
			Msg  string `json:"msg"`
			Pgid int    `json:"pgid"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil {
			continue
		}
		if entry.Msg == "replica started" {
			pgids = append(pgids, entry.Pgid)
		}
		allRunning = strings.HasPrefix(entry.Msg, "ps 1/1 running, worker 2/2 running")
	}
	if !allRunning {
		t.Fatalf("the replicas never all ran:\n%s", log.String())
	}
	time.Sleep(500 * time.Millisecond) // training under way
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() { // keep the pipe drained while trainstep stops
		for lines.Scan() {
		}
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("trainstep did not exit within 30s of SIGINT")
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != result.ExitTerminated {
		t.Errorf("trainstep exited with %v, want exit code %d", err, result.ExitTerminated)
	}
	if phase, _ := os.ReadFile(filepath.Join(outputs, "phase")); strings.TrimSpace(string(phase)) != string(result.PhaseTerminated) {
		t.Errorf("phase output = %q, want Terminated", phase)
	}
	if !strings.Contains(stdout.String(), `"phase":"Terminated"`) {
		t.Errorf("stdout = %q, want the Terminated result", stdout.String())
	}
	if len(pgids) != 3 {
		t.Errorf("recorded %d process groups, want 3", len(pgids))
	}
	proctest.AssertNoneLeft(t, pgids)
}

// The local backend's own checks name the Kubeflow manifest's paths too.
func TestLocalErrorsOfAKubeflowManifestUseItsPaths(t *testing.T) {
	tfjob := `apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist-mnist}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          containers: [{name: tensorflow, image: example.com/mnist:1, command: [no-such-trainer]}]
`
	r := runLocally(t, t.Context(), []byte(tfjob), spec.Options{}, watchLog())
	if r.res.Phase != result.PhaseInvalid {
		t.Fatalf("phase %s (%v), want Invalid", r.res.Phase, r.err)
	}
	if want := "spec.tfReplicaSpecs.Worker.template.spec.containers[0].command[0]"; !strings.Contains(r.res.Message, want) {
		t.Errorf("message %q does not name %s", r.res.Message, want)
	}
}

// recreatedTwiceJob: Worker/0 exits with the retryable code 75 twice, so it
// is recreated twice, then succeeds; the ps runs until it is stopped.
const recreatedTwiceJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: recreated}
spec:
  framework: tensorflow
  replicaSpecs:
    PS:
      template:
        spec:
          containers: [{name: tensorflow, image: none, command: [sleep, "60"]}]
    Worker:
      restartPolicy: ExitCode
      retryableExitCodes: [75]
      template:
        spec:
          containers:
          - name: tensorflow
            image: none
            command: [sh, -c, 'n=$(cat "$COUNT" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNT"; if [ $n -le 2 ]; then exit 75; fi']
`

// replicas.json: a replica trainstep stopped is Stopped, not Running, and
// per-replica restarts add up to the job's.
func TestReplicasShowStoppedAndTheirOwnRestarts(t *testing.T) {
	count := filepath.Join(t.TempDir(), "count")
	r := runLocally(t, t.Context(), []byte(recreatedTwiceJob), spec.Options{Envs: []string{"COUNT=" + count}}, watchLog())
	if r.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%v)\n%s", r.res.Phase, r.err, r.stderr)
	}
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(r.output(t, "replicas.json")), &replicas); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var sum int32
	for _, rs := range replicas {
		got[rs.Type] = fmt.Sprintf("%s restarts %d", rs.Phase, rs.Restarts)
		sum += rs.Restarts
	}
	want := map[string]string{"PS": "Stopped restarts 0", "Worker": "Succeeded restarts 2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replicas.json (-want +got):\n%s", diff)
	}
	if restarts := r.output(t, "restarts"); restarts != "2" || sum != 2 {
		t.Errorf("job restarts %s, replicas' sum %d; want both 2", restarts, sum)
	}
}

// A termination message that is not JSON gives metrics.json {} with a
// warning, and its text is kept in the termination-message output.
func TestTerminationMessageThatIsNotJSONIsKeptAndWarnedAbout(t *testing.T) {
	job := `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: plain}
spec:
  framework: jax
  replicaSpecs:
    Worker:
      template:
        spec:
          containers:
          - {name: jax, image: none, command: [sh, -c, 'printf "accuracy=0.93" > "$TRAINSTEP_TERMINATION_MESSAGE_PATH"']}
`
	r := runLocally(t, t.Context(), []byte(job), spec.Options{}, watchLog())
	if r.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%v)", r.res.Phase, r.err)
	}
	if got := r.output(t, "metrics.json"); got != "{}" {
		t.Errorf("metrics.json = %q, want {}", got)
	}
	if got := r.output(t, "termination-message"); got != "accuracy=0.93" {
		t.Errorf("termination-message = %q, want the text the replica wrote", got)
	}
	if !strings.Contains(r.stdout, `"terminationMessage":"accuracy=0.93"`) {
		t.Errorf("stdout %q lacks the termination message", r.stdout)
	}
	warned := r.logs.FilterMessageSnippet("gives no metrics").All()
	if len(warned) != 1 || warned[0].Level != zapcore.WarnLevel {
		t.Errorf("want one warning about the termination message, got %v", warned)
	}
}
