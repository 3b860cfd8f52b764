package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trainstep/trainstep/pkg/outputs"
	"github.com/trainstep/trainstep/pkg/result"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		_ = os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// trainstepBinary builds this command once per test process, so exit codes,
// streams and signals are those a user sees.
func trainstepBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "trainstep-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "trainstep")
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building trainstep: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// localJob is a one-worker JAX job whose worker runs script with sh.
func localJob(name, script string) string {
	return fmt.Sprintf(`apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: %s}
spec:
  framework: jax
  replicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          terminationGracePeriodSeconds: 20
          containers:
          - name: jax
            image: none
            command: [sh, -c, %q]
`, name, script)
}

// exitPath is one row of the table of exit paths in docs/running.md.
type exitPath struct {
	name string
	// args of trainstep; "@x" is the file x of the row's directory, "@@" the directory.
	args  []string
	files map[string]string
	// env replaces these variables; HOME and KUBECONFIG are always the row's.
	env map[string]string
	// signals, when set, are sent once the worker runs, this far apart.
	signals int
	code    int
	phase   result.Phase
	reason  string
	noFiles bool // the outputs directory cannot be written: no file at all
	// unreadable is a file of the row made unreadable (needs a user other than root).
	unreadable string
	outputs    map[string]string // exact content of these output files
	messages   []string          // substrings of the result's message
}

func TestExitPaths(t *testing.T) {
	bin := trainstepBinary(t)
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","message":"forbidden: User \"ci\" cannot create selfsubjectrulesreviews","code":403}`)
	}))
	defer forbidden.Close()
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","message":"Unauthorized","code":401}`)
	}))
	defer unauthorized.Close()
	noRights := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"kind":"SelfSubjectRulesReview","apiVersion":"authorization.k8s.io/v1","spec":{},"status":{"resourceRules":[],"nonResourceRules":[],"incomplete":false}}`)
	}))
	defer noRights.Close()

	ok := localJob("exits", `printf '{"accuracy": 0.9}' > "$TRAINSTEP_TERMINATION_MESSAGE_PATH"`)
	cases := []exitPath{
		{name: "succeeded", args: []string{"run", "--local", "-f", "@job.yaml"}, files: map[string]string{"job.yaml": ok},
			code: 0, phase: result.PhaseSucceeded, reason: result.ReasonSucceeded,
			outputs: map[string]string{"job-name": "exits", "restarts": "0", "metrics.json": `{"accuracy":0.9}`,
				"replicas.json":       `[{"type":"Worker","index":0,"phase":"Succeeded","exitCode":0,"restarts":0,"node":"` + hostname(t) + `"}]`,
				"termination-message": `{"accuracy": 0.9}`}},
		{name: "failed", args: []string{"run", "--local", "-f", "@job.yaml"}, files: map[string]string{"job.yaml": localJob("exits", "exit 3")},
			code: 10, phase: result.PhaseFailed, reason: result.ReasonReplicaFailed,
			outputs: map[string]string{"job-name": "exits", "metrics.json": "{}",
				"replicas.json": `[{"type":"Worker","index":0,"phase":"Failed","exitCode":3,"restarts":0,"node":"` + hostname(t) + `"}]`}},
		{name: "invalid spec", args: []string{"run", "--local", "-f", "@job.yaml", "--set", "spec.replicaSpecs.Worker.replicas=-1"}, files: map[string]string{"job.yaml": ok},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidSpec,
			outputs: map[string]string{"job-name": "exits", "replicas.json": "[]", "metrics.json": "{}"}, messages: []string{"spec.replicaSpecs.Worker.replicas: Invalid value: -1"}},
		{name: "job file missing", args: []string{"run", "--local", "-f", "@nope.yaml"},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidArguments, messages: []string{"reading the job file", "no such file"}},
		{name: "job file unreadable", args: []string{"run", "--local", "-f", "@unreadable.yaml"}, files: map[string]string{"unreadable.yaml": ok}, unreadable: "unreadable.yaml",
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidArguments, messages: []string{"reading the job file", "permission denied"}},
		{name: "job file is a directory", args: []string{"run", "--local", "-f", "@@"},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidArguments, messages: []string{"reading the job file", "is a directory"}},
		{name: "bad --logs", args: []string{"run", "--local", "-f", "@job.yaml", "--logs", "foo"}, files: map[string]string{"job.yaml": ok},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidArguments, messages: []string{"--logs"},
			outputs: map[string]string{"job-name": "exits"}},
		{name: "bad --log-format", args: []string{"run", "--local", "-f", "@job.yaml", "--log-format", "xml"}, files: map[string]string{"job.yaml": ok},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidArguments, messages: []string{`--log-format: "xml"`}},
		{name: "unknown flag", args: []string{"run", "--local", "-f", "@job.yaml", "--colour", "blue"}, files: map[string]string{"job.yaml": ok},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidArguments, messages: []string{"unknown flag: --colour"}},
		{name: "flag value that does not parse", args: []string{"run", "--local", "-f", "@job.yaml", "--api-timeout", "soon"}, files: map[string]string{"job.yaml": ok},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidArguments, messages: []string{"--api-timeout"}},
		{name: "two job files", args: []string{"run", "--local", "-f", "@job.yaml", "@job.yaml"}, files: map[string]string{"job.yaml": ok},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidArguments, messages: []string{"one run takes one job file, got 2"}},
		{name: "local command not found", args: []string{"run", "--local", "-f", "@job.yaml"},
			files: map[string]string{"job.yaml": strings.Replace(ok, "command: [sh, -c,", "command: [no-such-trainer, -c,", 1)},
			code:  11, phase: result.PhaseInvalid, reason: result.ReasonInvalidSpec, messages: []string{"containers[0].command[0]", "not found"}},
		{name: "no cluster", args: []string{"run", "-f", "@job.yaml"}, files: map[string]string{"job.yaml": ok},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonNoCluster, messages: []string{"~/.kube/config"}},
		{name: "API server refuses", args: []string{"run", "-f", "@job.yaml", "--kubeconfig", "@kubeconfig"},
			files: map[string]string{"job.yaml": ok, "kubeconfig": kubeconfigFor(forbidden.URL)},
			code:  11, phase: result.PhaseInvalid, reason: result.ReasonForbidden, messages: []string{"forbidden"}},
		{name: "API server rejects the credentials", args: []string{"run", "-f", "@job.yaml", "--kubeconfig", "@kubeconfig"},
			files: map[string]string{"job.yaml": ok, "kubeconfig": kubeconfigFor(unauthorized.URL)},
			code:  11, phase: result.PhaseInvalid, reason: result.ReasonUnauthorized, messages: []string{"rejected the credentials"}},
		{name: "a permission is missing", args: []string{"run", "-f", "@job.yaml", "--kubeconfig", "@kubeconfig"},
			files: map[string]string{"job.yaml": ok, "kubeconfig": kubeconfigFor(noRights.URL)},
			code:  11, phase: result.PhaseInvalid, reason: result.ReasonForbidden, messages: []string{`missing permission in namespace "team-a": cannot create pods`}},
		{name: "kubeconfig cannot be used", args: []string{"run", "-f", "@job.yaml", "--kubeconfig", "@no-such-kubeconfig"}, files: map[string]string{"job.yaml": ok},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidKubeconfig, messages: []string{"no-such-kubeconfig"}},
		{name: "API server unreachable", args: []string{"run", "-f", "@job.yaml", "--api-timeout", "1s"},
			files: map[string]string{"job.yaml": ok, ".kube/config": kubeconfigFor("https://127.0.0.1:1")},
			code:  12, phase: result.PhaseTransient, reason: result.ReasonAPIUnreachable, messages: []string{"did not answer for 1s"}},
		{name: "terminated", args: []string{"run", "--local", "-f", "@job.yaml"}, files: map[string]string{"job.yaml": localJob("exits", "sleep 60")},
			signals: 1, code: 13, phase: result.PhaseTerminated, reason: result.ReasonTerminated,
			outputs: map[string]string{"replicas.json": `[{"type":"Worker","index":0,"phase":"Stopped","restarts":0,"node":"` + hostname(t) + `"}]`}},
		{name: "second signal", args: []string{"run", "--local", "-f", "@job.yaml"}, files: map[string]string{"job.yaml": localJob("exits", "trap '' TERM; sleep 60")},
			signals: 2, code: 13, phase: result.PhaseTerminated, reason: result.ReasonTerminated, messages: []string{"second signal"},
			outputs: map[string]string{"job-name": "exits"}},
		{name: "outputs directory cannot be written", args: []string{"run", "--local", "-f", "@job.yaml", "--outputs-dir", "@job.yaml/outputs"},
			files: map[string]string{"job.yaml": localJob("exits", `touch "$MARKER"`)},
			code:  11, phase: result.PhaseInvalid, reason: result.ReasonOutputsDirUnusable, noFiles: true, messages: []string{"nothing was started"}},
		{name: "--outputs-dir without a value", args: []string{"run", "--local", "-f", "@job.yaml", "--outputs-dir"}, files: map[string]string{"job.yaml": ok},
			code: 11, phase: result.PhaseInvalid, reason: result.ReasonInvalidArguments, noFiles: true, messages: []string{"flag needs an argument"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runExitPath(t, bin, tc) })
	}
}

func runExitPath(t *testing.T, bin string, tc exitPath) {
	dir := t.TempDir()
	// Root reads every file: an unreadable job file needs another user,
	// and a directory that user can work in.
	asNobody := tc.unreadable != "" && os.Geteuid() == 0
	if asNobody {
		shared, err := os.MkdirTemp("", "trainstep-exitpath-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(shared) })
		for _, d := range []string{shared, filepath.Dir(bin)} {
			if err := os.Chmod(d, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		dir = shared
	}
	for name, content := range tc.files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if tc.unreadable != "" {
		if err := os.Chmod(filepath.Join(dir, tc.unreadable), 0); err != nil {
			t.Fatal(err)
		}
	}
	outputsDir := filepath.Join(dir, "outputs")
	args := []string{}
	for _, a := range tc.args {
		switch {
		case a == "@@":
			a = dir
		case strings.HasPrefix(a, "@"):
			a = filepath.Join(dir, a[1:])
		}
		args = append(args, a)
	}
	if !slicesContain(args, "--outputs-dir") {
		args = append(args, "--outputs-dir", outputsDir)
	}
	marker := filepath.Join(dir, "marker")
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if asNobody {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	cmd.Env = append(os.Environ(), "HOME="+dir, "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "POD_NAMESPACE=", "MARKER="+marker)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	var log strings.Builder
	lines := bufio.NewScanner(stderr)
	if tc.signals > 0 {
		for lines.Scan() {
			log.WriteString(lines.Text() + "\n")
			if strings.Contains(lines.Text(), "replica started") {
				break
			}
		}
		time.Sleep(300 * time.Millisecond)
		for i := 0; i < tc.signals; i++ {
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	for lines.Scan() {
		log.WriteString(lines.Text() + "\n")
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(60 * time.Second):
		t.Fatalf("trainstep did not exit within 60s\n%s", log.String())
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != tc.code {
		t.Errorf("exit code %d, want %d", code, tc.code)
	}

	// stdout: exactly one line, the result.
	if strings.Count(stdout.String(), "\n") != 1 || !strings.HasSuffix(stdout.String(), "\n") {
		t.Fatalf("stdout %q is not exactly one line\nstderr:\n%s", stdout.String(), log.String())
	}
	var printed result.Result
	if err := json.Unmarshal(stdout.Bytes(), &printed); err != nil {
		t.Fatalf("stdout is not the result JSON: %v: %q", err, stdout.String())
	}
	if printed.Phase != tc.phase || printed.Reason != tc.reason {
		t.Errorf("stdout phase/reason %s/%s, want %s/%s (message %q)", printed.Phase, printed.Reason, tc.phase, tc.reason, printed.Message)
	}
	for _, m := range tc.messages {
		if !strings.Contains(printed.Message, m) {
			t.Errorf("message %q lacks %q", printed.Message, m)
		}
	}
	if tc.signals == 0 && tc.phase != result.PhaseSucceeded && !strings.Contains(log.String(), "Error: ") {
		t.Errorf("stderr does not say what went wrong:\n%s", log.String())
	}
	// A stop was asked for: it is no error, and no line carries a stack trace.
	if tc.signals == 1 && (strings.Contains(log.String(), "Error: ") || !strings.Contains(log.String(), "Stopped: ")) {
		t.Errorf("a stopped run's stderr must say Stopped:, not Error::\n%s", log.String())
	}
	if strings.Contains(log.String(), "stacktrace") {
		t.Errorf("stderr carries a stack trace:\n%s", log.String())
	}

	// Output files: all of them, agreeing with stdout, or none.
	names := []string{outputs.FilePhase, outputs.FileReason, outputs.FileJobName, outputs.FileDurationSeconds,
		outputs.FileRestarts, outputs.FileReplicas, outputs.FileMetrics, outputs.FileTerminationMessage}
	if tc.noFiles {
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(outputsDir, n)); err == nil {
				t.Errorf("output %s was written", n)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the replica ran although the outputs directory cannot be written")
		}
		return
	}
	got := map[string]string{}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(outputsDir, n))
		if err != nil {
			t.Errorf("output %s: %v", n, err)
		}
		got[n] = string(data)
	}
	want := map[string]string{
		outputs.FilePhase: string(tc.phase), outputs.FileReason: tc.reason, outputs.FileJobName: printed.JobName,
		outputs.FileDurationSeconds: printed.DurationSeconds.String(), outputs.FileRestarts: fmt.Sprint(printed.Restarts),
	}
	for n, v := range tc.outputs {
		want[n] = v
	}
	for n, v := range want {
		if got[n] != v {
			t.Errorf("output %s = %q, want %q", n, got[n], v)
		}
	}
}

func kubeconfigFor(server string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: team-a}}]
current-context: c
`, server)
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func slicesContain(values []string, want string) bool {
	for _, v := range values {
		if v == want {
			return true
		}
	}
	return false
}
