package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainstep/trainstep/internal/testutil"

	"github.com/trainstep/trainstep/cmd/demo-trainer/internal/trainer"
)

// trainerBinary is the demo trainer built once for every end-to-end test.
var trainerBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "demo-trainer-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	trainerBinary = filepath.Join(dir, "demo-trainer")
	build := exec.Command("go", "build", "-o", trainerBinary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building the demo trainer: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// replica is one running demo-trainer process.
type replica struct {
	name        string
	env         []string
	metricsPath string
	cmd         *exec.Cmd
	out         *testutil.SyncBuffer
	exited      chan struct{}
}

// startReplica runs the trainer with exactly env (plus the termination
// message path), as the local backend would.
func startReplica(t *testing.T, name string, env []string, args ...string) *replica {
	t.Helper()
	r := &replica{name: name, env: env, metricsPath: filepath.Join(t.TempDir(), "termination-log")}
	r.start(t, args...)
	return r
}

func (r *replica) start(t *testing.T, args ...string) {
	t.Helper()
	r.out = &testutil.SyncBuffer{}
	r.exited = make(chan struct{})
	r.cmd = exec.Command(trainerBinary, args...)
	r.cmd.Env = append(slices.Clone(r.env), "TRAINSTEP_TERMINATION_MESSAGE_PATH="+r.metricsPath)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", r.name, err)
	}
	cmd, exited := r.cmd, r.exited
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
}

// exitCode waits for the process; -1 means it was killed by a signal.
func (r *replica) exitCode(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(timeout):
		t.Fatalf("%s still running after %v; output:\n%s", r.name, timeout, r.out.String())
	}
	return r.cmd.ProcessState.ExitCode()
}

func (r *replica) mustSucceed(t *testing.T) {
	t.Helper()
	if code := r.exitCode(t, time.Minute); code != 0 {
		t.Fatalf("%s exited %d; output:\n%s", r.name, code, r.out.String())
	}
}

func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("killing %s: %v", r.name, err)
	}
	if code := r.exitCode(t, 10*time.Second); code != -1 {
		t.Fatalf("%s exited %d before it could be killed", r.name, code)
	}
}

var (
	stepLine  = regexp.MustCompile(`(?m)^step (\d+) loss (\S+)$`)
	finalLine = regexp.MustCompile(`(?m)^final steps (\d+) loss (\S+)$`)
)

type loggedStep struct {
	step int
	loss float64
}

func (r *replica) steps() []loggedStep {
	var steps []loggedStep
	for _, m := range stepLine.FindAllStringSubmatch(r.out.String(), -1) {
		step, _ := strconv.Atoi(m[1])
		loss, _ := strconv.ParseFloat(m[2], 64)
		steps = append(steps, loggedStep{step, loss})
	}
	return steps
}

// waitForStep waits until the replica has logged a step at or past step.
func (r *replica) waitForStep(t *testing.T, step int) loggedStep {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if steps := r.steps(); len(steps) > 0 && steps[len(steps)-1].step >= step {
			return steps[len(steps)-1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never logged step %d; output:\n%s", r.name, step, r.out.String())
	return loggedStep{}
}

// checkDecidingReplica checks what a user of the job sees from the replica
// that decided: its metrics JSON is the result it logged, training
// converged below 1% of the initial loss, and it found the true weights.
func checkDecidingReplica(t *testing.T, r *replica, s trainer.Settings) trainer.Metrics {
	t.Helper()
	body, err := os.ReadFile(r.metricsPath)
	if err != nil {
		t.Fatalf("%s wrote no metrics: %v; output:\n%s", r.name, err, r.out.String())
	}
	var m trainer.Metrics
	decoder := json.NewDecoder(bytes.NewReader(body))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&m); err != nil {
		t.Fatalf("%s metrics %s: %v", r.name, body, err)
	}
	final := finalLine.FindStringSubmatch(r.out.String())
	if final == nil {
		t.Fatalf("%s logged no final line; output:\n%s", r.name, r.out.String())
	}
	if final[1] != strconv.Itoa(m.Steps) || final[2] != strconv.FormatFloat(m.Loss, 'g', -1, 64) {
		t.Errorf("%s logged %q but wrote %s", r.name, final[0], body)
	}
	if !strings.Contains(r.out.String(), "metrics "+string(body)+"\n") {
		t.Errorf("%s wrote metrics %s that it did not log", r.name, body)
	}
	data, trueWeights := trainer.Generate(s.Seed, s.Samples, s.Features)
	initial := data.Loss(make([]float64, s.Features))
	steps := r.steps()
	if len(steps) == 0 {
		t.Fatalf("%s logged no steps", r.name)
	}
	// The initial loss is the loss at the zero weights every run starts
	// from. (A parameter-server task's first logged loss can be lower: the
	// others may have trained before it joined.)
	if m.Loss >= 0.01*initial {
		t.Errorf("%s: final loss %v is not below 1%% of the initial loss %v", r.name, m.Loss, initial)
	}
	if len(m.Weights) != s.Features {
		t.Fatalf("%s: %d weights for %d features", r.name, len(m.Weights), s.Features)
	}
	for j, w := range m.Weights {
		if d := w - trueWeights[j]; d > 0.05 || d < -0.05 {
			t.Errorf("%s: weight %d is %v, the data was generated with %v", r.name, j, w, trueWeights[j])
		}
	}
	t.Logf("%s: initial loss %.4g, first logged %.4g, final %.4g after %d steps", r.name, initial, steps[0].loss, m.Loss, m.Steps)
	return m
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func freeAddresses(t *testing.T, n int) []string {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	return addrs
}

// tfConfig is the TF_CONFIG of one task, as a training operator writes it.
func tfConfig(t *testing.T, cluster map[string][]string, taskType string, index int) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"cluster":     cluster,
		"task":        map[string]any{"type": taskType, "index": index},
		"environment": "cloud",
	})
	if err != nil {
		t.Fatal(err)
	}
	return "TF_CONFIG=" + string(body)
}
