package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainstep/trainstep/internal/testutil"
)

// TestRealNodeKilledRankRestartsTheAllReduceJob runs the shipped demo all-reduce job
// through the ClusterWorkflowTemplate and kills one rank's process from the node with
// SIGKILL, as the OOM killer would, while it trains. Its peers' ring breaks; the job
// restarts as a whole (one restart), rank 0 resumes from its checkpoint, and the step
// succeeds; its outputs and log say so.
func TestRealNodeKilledRankRestartsTheAllReduceJob(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	checkpoints := e.checkpointClaim(t, allReduceClaim)
	manifest, err := json.Marshal(string(readFile(t, filepath.Join(repoRoot(t), allReduceJob))))
	if err != nil {
		t.Fatal(err)
	}
	wf := workflowFromYAML(t, fmt.Sprintf(clusterTemplateWorkflow, localImage, manifest, pythonImage))
	name := e.submit(t, wf)
	// Rank 2 is worker-1; wait until it trains past rank 0's first checkpoint (on a loaded
	// machine a few seconds of training need not reach one).
	var pid int
	testutil.Eventually(t, 3*time.Minute, "rank 2 training past the first checkpoint", func(ctx context.Context) (bool, error) {
		pid = rankProcess(e.jobName(ctx), 2)
		if pid == 0 {
			return false, nil
		}
		// The job keeps it in /var/tmp/<master pod>, on the claim.
		found, err := filepath.Glob(filepath.Join(checkpoints, "*", "checkpoint.json"))
		return err == nil && len(found) > 0, nil
	}, func() string { return e.podSummary(t) })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing rank 2 (pid %d): %v", pid, err)
	}
	t.Logf("killed rank 2 (pid %d) from the node", pid)
	wf = e.waitForWorkflow(t, name, 5*time.Minute, "Succeeded", "Failed", "Error")
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s", name, phaseOf(wf), nodeSummary(wf))
	}
	train := podNode(t, wf, "train")
	if got := param(t, train.Outputs.Parameters, "restarts"); got != "1" {
		t.Errorf("train output restarts = %s, want 1: one job restart for one killed rank", got)
	}
	var metrics struct {
		Steps int `json:"steps"`
	}
	if err := json.Unmarshal([]byte(param(t, train.Outputs.Parameters, "metrics")), &metrics); err != nil || metrics.Steps != 150 {
		t.Errorf("train output metrics = %s, want the job's 150 steps", param(t, train.Outputs.Parameters, "metrics"))
	}
	stepLog := e.logOf(t, e.podOfNode(t, wf, train).Name, "main")
	checkJobRestartLogged(t, stepLog, "worker-1 exit 137")
	for _, want := range []string{"resuming from the checkpoint of step"} {
		if !strings.Contains(stepLog, want) {
			t.Errorf("the train step's log does not say %q:\n%s", want, lastLines(stepLog, 40))
		}
	}
}

// rankProcess finds, on this host (the real node), the demo trainer process of job whose
// environment says RANK=rank; 0 when there is none.
func rankProcess(job string, rank int) int {
	return processWith(job, "--checkpoint-dir", "RANK="+strconv.Itoa(rank))
}

// processWith finds a process of job's replicas on this host whose command line contains
// part and whose environment holds env (NAME=value); 0 when there is none. The job's name
// in the environment keeps a test off the processes of the tests that run beside it.
func processWith(job, part, env string) int {
	if job == "" {
		return 0
	}
	found := hostProcesses(func(cmdline string, environ []string) bool {
		return strings.Contains(cmdline, part) && slices.Contains(environ, env) &&
			slices.Contains(environ, jobNameEnv+"="+job)
	})
	if len(found) == 0 {
		return 0
	}
	return found[0]
}

// hostProcesses lists the processes of this host whose command line (its arguments
// joined by NUL) and environment match.
func hostProcesses(match func(cmdline string, environ []string) bool) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil {
			continue
		}
		environ, _ := os.ReadFile(filepath.Join("/proc", entry.Name(), "environ"))
		if match(string(cmdline), strings.Split(string(environ), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
