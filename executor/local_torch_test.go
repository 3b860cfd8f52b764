package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainstep/trainstep/pkg/logs"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// debianPython is the interpreter Debian's python3-torch installs into.
const debianPython = "/usr/bin/python3"

// requireTorch skips without Debian's python3-torch, except under CI,
// where `make test-deps` installs it and its absence is a failure.
func requireTorch(t *testing.T) {
	t.Helper()
	out, err := exec.Command(debianPython, "-c", "import torch.distributed as d; assert d.is_gloo_available()").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("PyTorch with gloo is not importable by %s (apt-get install python3-torch): %v\n%s", debianPython, err, out)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// ddpJob is a Kubeflow PyTorchJob, as Training Operator takes it: a master
// and two workers running real DDP training with gloo on CPU.
func ddpJob(t *testing.T, restartPolicy string, env map[string]string) []byte {
	t.Helper()
	script, err := filepath.Abs("testdata/ddp_train.py")
	if err != nil {
		t.Fatal(err)
	}
	var envYAML strings.Builder
	for k, v := range env {
		fmt.Fprintf(&envYAML, "                - {name: %s, value: %q}\n", k, v)
	}
	replica := func(n int) string {
		return fmt.Sprintf(`      replicas: %d
      restartPolicy: %s
      template:
        spec:
          containers:
            - name: pytorch
              image: debian-python3-torch
              command: [%s, %s]
              env:
%s`, n, restartPolicy, debianPython, script, envYAML.String())
	}
	return []byte(fmt.Sprintf(`apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp}
spec:
  runPolicy: {backoffLimit: 1}
  pytorchReplicaSpecs:
    Master:
%s    Worker:
%s`, replica(1), replica(2)))
}

// One rank of a real DDP job killed once (SIGKILL at step 50 of 300, as
// the OOM killer would): its peers' gloo calls break, the job restarts as
// a whole from its checkpoint and succeeds, for one restart — under
// OnFailure and ExitCode alike, within backoffLimit 1.
func TestRealPyTorchDDPSurvivesOneKilledRank(t *testing.T) {
	requireTorch(t)
	for _, policy := range []string{"OnFailure", "ExitCode"} {
		t.Run(policy, func(t *testing.T) {
			ckpt := t.TempDir()
			manifest := ddpJob(t, policy, map[string]string{"CKPT_DIR": ckpt, "KILL_RANK": "2", "KILL_AT": "50", "STEPS": "300"})
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			r := runLocallyMode(t, ctx, manifest, spec.Options{}, watchLog(), logs.ModeAll)
			if r.res.Phase != result.PhaseSucceeded || r.res.Restarts != 1 {
				t.Fatalf("phase %s restarts %d (%s), want Succeeded after 1 restart; replicas' log:\n%s",
					r.res.Phase, r.res.Restarts, r.res.Message, lastLines(r.stderr.String(), 40))
			}
			out := r.stderr.String()
			for _, want := range []string{"[worker-1] rank 2: killed at step 50", "resuming at step ", "[master-0] step 300 loss"} {
				if !strings.Contains(out, want) {
					t.Errorf("the replicas' log does not say %q:\n%s", want, lastLines(out, 40))
				}
			}
			if resumed := resumedAt.FindStringSubmatch(out); resumed == nil || (resumed[1] != "40" && resumed[1] != "50") {
				t.Errorf("resumed at %v, want the checkpoint of step 40 or 50, not step 0", resumed)
			}
			if loss, err := strconv.ParseFloat(fmt.Sprint(r.res.Metrics["loss"]), 64); err != nil || loss > 0.01 {
				t.Errorf("metrics %v, want the final loss (below 0.01)", r.res.Metrics)
			}
			if n := len(r.logs.FilterMessageSnippet("restarting the job (attempt 2): worker-1 exit 137").All()); n != 1 {
				t.Errorf("%d log lines say the job restarts because worker-1 exited 137, want 1", n)
			}
		})
	}
}

// A rank that exits 1 (a bug, under ExitCode) fails the job at once:
// nothing is restarted.
func TestRealPyTorchDDPFailsAtOnceOnABug(t *testing.T) {
	requireTorch(t)
	manifest := ddpJob(t, "ExitCode", map[string]string{"CKPT_DIR": t.TempDir(), "FAIL_RANK": "1", "KILL_AT": "20", "STEPS": "300"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := runLocallyMode(t, ctx, manifest, spec.Options{}, watchLog(), logs.ModeAll)
	if r.res.Phase != result.PhaseFailed || r.res.Reason != result.ReasonReplicaFailed || r.res.Restarts != 0 {
		t.Fatalf("phase %s reason %s restarts %d (%s), want Failed ReplicaFailed with no restart", r.res.Phase, r.res.Reason, r.res.Restarts, r.res.Message)
	}
	if !strings.Contains(r.res.Message, "Worker/0") || !strings.Contains(r.res.Message, "exit code 1") {
		t.Errorf("message %q, want worker-0's exit 1 named as the cause", r.res.Message)
	}
	if n := len(r.logs.FilterMessageSnippet("replica started").All()); n != 3 {
		t.Errorf("%d replicas started, want the 3 of the first attempt only", n)
	}
}

var resumedAt = regexp.MustCompile(`resuming at step (\d+)`)

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
