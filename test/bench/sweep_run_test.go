package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/result"
)

// stepMemorySample is how often each of many trainstep processes' resident
// set is read. Its peak is the one its --timeline reports at its end (the
// process's own high-water mark); the reads only stand in for a timeline
// without it (an older build). Read every 100 ms, 64 processes took the
// benchmark 2 to 3 s of CPU, beside the steps it measured.
const stepMemorySample = time.Second

// Argo's retry of a step that exited 12, as the train template's
// retryStrategy has it: up to argoRetryLimit more attempts, after
// argoRetryBackoff doubling.
const (
	argoRetryLimit   = 3
	argoRetryBackoff = 30 * time.Second
)

// sweepNamespace is one side's namespace: deploy/'s ServiceAccount
// trainstep with its Roles (deploy/secrets/ too, for the progress
// endpoint), and that account's credentials, which both sides use: the API
// server's flow control puts them in the same priority level, as it would
// a workflow's steps.
type sweepNamespace struct {
	ns         string
	kubeconfig string
	config     *rest.Config
}

func (h *harness) newSweepNamespace(t *testing.T) sweepNamespace {
	t.Helper()
	ns := h.c.NamespaceWithPrefix(t, "s-")
	root := repoRoot(t)
	for _, file := range []string{"deploy/role.yaml", "deploy/rolebinding.yaml", "deploy/secrets/role.yaml", "deploy/secrets/rolebinding.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if strings.Contains(string(data), "kind: RoleBinding") {
			var b rbacv1.RoleBinding
			if err = yaml.UnmarshalStrict(data, &b); err == nil {
				_, err = h.admin.RbacV1().RoleBindings(ns).Create(ctx, &b, metav1.CreateOptions{})
			}
		} else {
			var r rbacv1.Role
			if err = yaml.UnmarshalStrict(data, &r); err == nil {
				_, err = h.admin.RbacV1().Roles(ns).Create(ctx, &r, metav1.CreateOptions{})
			}
		}
		if err != nil {
			t.Fatalf("applying %s: %v", file, err)
		}
	}
	token := h.c.ServiceAccountToken(t, ns, "trainstep")
	return sweepNamespace{ns: ns, kubeconfig: h.c.KubeconfigForToken(t, token, ns), config: h.c.ConfigForToken(token)}
}

// trialStep is one trial's step, run as Argo runs a train step: a step pod,
// then `trainstep run` in it, as its owner. An exit 12 is retried in a new
// step pod after the retryStrategy's backoff; a process the bench killed
// (the isolation check) is started again at once, in a new step pod.
type trialStep struct {
	h       *harness
	sn      sweepNamespace
	trial   TrialSpec
	file    string
	dir     string
	started time.Time // the sweep's start
	// profiled: the step's first attempt runs with --cpu-profile.
	profiled bool

	mu     sync.Mutex
	proc   *Process
	killed bool
	// abandoned: the sweep ran out of time; the step was stopped.
	abandoned bool
	attempts  []stepAttempt
	done      chan struct{}
	err       error
}

// stepAttempt is one process of a trial's step.
type stepAttempt struct {
	stepPod   string
	stepUID   types.UID
	exit      Exit
	requests  map[string]int
	throttled map[string]int
	phase     string
	replicas  string // the replicas.json output
	restarts  string
	// timeline is its --timeline table, stages when it reached LaunchStages.
	timeline string
	stages   map[string]time.Duration
	// cpuProfile is its --cpu-profile, when the step is the one profiled.
	cpuProfile string
}

func newTrialStep(t *testing.T, h *harness, sn sweepNamespace, trial TrialSpec) *trialStep {
	t.Helper()
	dir := t.TempDir()
	manifest, err := trial.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(file, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	return &trialStep{h: h, sn: sn, trial: trial, file: file, dir: dir, done: make(chan struct{})}
}

// createStepPod creates the step pod of an attempt and waits until it runs.
func (s *trialStep) createStepPod(ctx context.Context, attempt int) (*corev1.Pod, error) {
	pod, err := s.h.admin.CoreV1().Pods(s.sn.ns).Create(ctx, StepPod(s.sn.ns, s.trial, attempt), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the step pod of %s: %w", s.trial.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := s.h.admin.CoreV1().Pods(s.sn.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for step pod %s to run: %w", pod.Name, err)
	}
	return pod, nil
}

// start runs the trial's step, attempt by attempt, in the background; the
// first attempt's step pod is given (created before the sweep starts).
func (s *trialStep) start(ctx context.Context, first *corev1.Pod) {
	go func() {
		defer close(s.done)
		s.err = s.run(ctx, first)
	}()
}

func (s *trialStep) run(ctx context.Context, pod *corev1.Pod) error {
	for attempt := 0; ; attempt++ {
		if pod == nil {
			var err error
			if pod, err = s.createStepPod(ctx, attempt); err != nil {
				return err
			}
		}
		a, err := s.runAttempt(ctx, pod, attempt)
		s.mu.Lock()
		s.attempts = append(s.attempts, a)
		killed, abandoned := s.killed, s.abandoned
		s.killed = false
		s.mu.Unlock()
		if err != nil {
			return err
		}
		pod = nil
		switch {
		case abandoned:
			return nil
		case killed:
		case a.exit.Code == result.ExitTransient && attempt < argoRetryLimit:
			select {
			case <-time.After(argoRetryBackoff << attempt):
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
			return nil
		}
	}
}

// runAttempt runs trainstep once in the step pod, as the train template does.
func (s *trialStep) runAttempt(ctx context.Context, pod *corev1.Pod, attempt int) (stepAttempt, error) {
	a := stepAttempt{stepPod: pod.Name, stepUID: pod.UID}
	dir := filepath.Join(s.dir, fmt.Sprintf("attempt-%d", attempt))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return a, err
	}
	timeline := filepath.Join(dir, "timeline.txt")
	args := append(s.trial.IdentityArgs(), "--owner-pod", pod.Name, "--owner-uid", string(pod.UID),
		"--workflow-name", "bench-sweep", "--trainer-status-address", "127.0.0.1:0", "--timeline", timeline)
	if s.profiled && attempt == 0 {
		a.cpuProfile = filepath.Join(dir, "cpu.pprof")
		args = append(args, "--cpu-profile", a.cpuProfile)
	}
	s.mu.Lock()
	p, err := StartTrainstep(RunOptions{Binary: s.h.binary, Kubeconfig: s.sn.kubeconfig, Namespace: s.sn.ns, JobFile: s.file,
		Dir: dir, ExtraArgs: args, MemorySample: stepMemorySample, Env: s.h.stepEnv})
	s.proc = p
	s.mu.Unlock()
	if err != nil {
		return a, err
	}
	if a.exit, err = p.Wait(ctx); err != nil {
		return a, fmt.Errorf("%s: %w", s.trial.Name, err)
	}
	a.requests, a.throttled, _ = p.APIStats()
	a.phase, a.replicas, a.restarts = readOutput(p, "phase"), readOutput(p, "replicas.json"), readOutput(p, "restarts")
	if data, err := os.ReadFile(timeline); err == nil {
		a.timeline, a.stages = string(data), StageTimes(string(data), LaunchStages...)
		a.exit.PeakRSS = max(a.exit.PeakRSS, TimelinePeakRSS(a.timeline))
	}
	return a, nil
}

func readOutput(p *Process, name string) string {
	data, err := os.ReadFile(filepath.Join(p.OutputsDir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// kill ends the running attempt at once (SIGKILL: nothing is torn down), and
// has the step start again.
func (s *trialStep) kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("%s has no process to kill", s.trial.Name)
	}
	s.killed = true
	return s.proc.Signal(syscall.SIGKILL)
}

// abandon stops the step for good: SIGTERM, as Argo stops a step (the job
// is torn down, exit 13).
func (s *trialStep) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abandoned = true
	if s.proc != nil {
		_ = s.proc.Signal(syscall.SIGTERM)
	}
}

// last is the step's last attempt.
func (s *trialStep) last() stepAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.attempts) == 0 {
		return stepAttempt{}
	}
	return s.attempts[len(s.attempts)-1]
}

// otherTrialPod finds a trial's pod name in a log line: sweep-<n>-worker-<i>.
var otherTrialPod = regexp.MustCompile(`sweep-\d+-worker-\d+`)

// problems are what went wrong with the step as the user would see it: it
// did not succeed in the end, its outputs list other than its own
// replicas, count restarts, or its log names another trial's pods.
func (s *trialStep) problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := s.trial.Name
	if s.err != nil {
		return []string{fmt.Sprintf("%s: %v", name, s.err)}
	}
	var out []string
	last := s.attempts[len(s.attempts)-1]
	if s.abandoned {
		return []string{fmt.Sprintf("%s lost: its step had not ended when the sweep's time ran out; stopped", name)}
	}
	if last.exit.Code != result.ExitSucceeded || last.phase != string(result.PhaseSucceeded) {
		out = append(out, fmt.Sprintf("%s lost: its last step exited %d, phase %q: %s", name, last.exit.Code, last.phase,
			strings.Join(logLinesAbout(last.exit.Stderr, `"level":"error"`, `"level":"warn"`), " ")))
	}
	if n := strings.Count(last.replicas, `"index"`); n != s.trial.Workers || last.restarts != "0" {
		out = append(out, fmt.Sprintf("%s: outputs list %d replicas with %s restarts, want %d and 0", name, n, last.restarts, s.trial.Workers))
	}
	for _, a := range s.attempts {
		for _, pod := range otherTrialPod.FindAllString(a.exit.Stderr, -1) {
			if !strings.HasPrefix(pod, name+"-worker-") {
				out = append(out, fmt.Sprintf("%s's step (pod %s) logs another trial's pod %s", name, a.stepPod, pod))
				break
			}
		}
	}
	return out
}

// waitSteps waits for every step to end. Those that have not when
// deadline ends are stopped (abandon) and waited for until ctx ends; it
// returns how many there were.
func waitSteps(ctx, deadline context.Context, steps []*trialStep) (int, error) {
	abandoned := 0
	for _, s := range steps {
		select {
		case <-s.done:
			continue
		case <-deadline.Done():
		}
		abandoned++
		s.abandon()
		select {
		case <-s.done:
		case <-ctx.Done():
			return abandoned, fmt.Errorf("waiting for %s's step, stopped: %w", s.trial.Name, ctx.Err())
		}
	}
	return abandoned, nil
}

// lastExit is when the last step's last process exited.
func lastExit(steps []*trialStep) time.Time {
	var last time.Time
	for _, s := range steps {
		s.mu.Lock()
		if s.proc != nil {
			last = later(last, s.proc.Exited)
		}
		s.mu.Unlock()
	}
	return last
}
