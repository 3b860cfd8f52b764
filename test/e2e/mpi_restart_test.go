package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// mpiRestartJob is mpiAllReduceJob whose ranks sleep 17 s before their all-reduce, so that
// a test can break one while it runs. Each worker's sshd runs under a shell that exits 1
// when sshd dies (and 0 when the pod is stopped); `OnFailure` makes that exit retryable,
// and MPI's default failure policy restarts the job as a whole. backoffLimit 1 allows the
// one restart the worker's failure costs, and no more.
var mpiRestartJob = mpiJobManifest("mpirestart", `[-n, "2", /bin/sh, -c, "sleep 17; exec `+allReduceProgramPath+`"]`, "OnFailure", `
              command: [/bin/sh, -c]
              args: ["trap 'kill $!; exit 0' TERM; /usr/sbin/sshd -De -f `+cluster.MPIUserSSHDConfig+` & wait $!; exit 1"]
              env:
                - name: POD_NAME
                  valueFrom: {fieldRef: {fieldPath: metadata.name}}`, 1)

// TestRealNodeMPIWorkerFailureCostsOneRestart breaks a real OpenMPI job while its ranks
// run: it kills worker-1's sshd from the node, so worker-1 exits 1 and the launcher's
// mpirun, which lost its rank, fails and is restarted in place by the kubelet. The job
// restarts as a whole once; the launcher's in-place restart followed the worker's end and
// costs nothing, so backoffLimit 1 holds. The second attempt's launcher waits for that
// attempt's workers to be Ready, its mpirun reaches them and the step succeeds.
func TestRealNodeMPIWorkerFailureCostsOneRestart(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	e.applySecretsAddition(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := importMPIImage(ctx, t, e.c); err != nil {
		t.Fatal(err)
	}
	manifest, err := json.Marshal(mpiRestartJob)
	if err != nil {
		t.Fatal(err)
	}
	name := e.submit(t, workflowFromYAML(t, fmt.Sprintf(mpiWorkflow, mpiImage, manifest, pythonImage)))

	// Both ranks sleep: mpirun reached both workers.
	testutil.Eventually(t, 3*time.Minute, "both ranks running", func(context.Context) (bool, error) {
		return len(processesWith("sleep\x0017\x00", "")) == 2, nil
	}, func() string { return e.podSummary(t) })
	// sshd's listener and its sessions, not the shell that runs it (its exit is the test's).
	// sshd overwrites its environment with its process title: it is found as the shell's child.
	shells := processesWith("/bin/sh\x00-c\x00trap", e.jobName(ctx)+"-worker-1")
	if len(shells) != 1 {
		t.Fatalf("found %d shells of worker-1 on the node, want 1; pods:\n%s", len(shells), e.podSummary(t))
	}
	sshd := descendantsOf(shells[0])
	if len(sshd) == 0 {
		t.Fatalf("worker-1's shell (pid %d) has no sshd; pods:\n%s", shells[0], e.podSummary(t))
	}
	launcher := e.launcherPod(ctx, t)
	// A session process under sshd may end between the listing and its kill
	// (ESRCH): gone is what the kill wants.
	killed := 0
	for _, pid := range sshd {
		switch err := syscall.Kill(pid, syscall.SIGKILL); {
		case err == nil:
			killed++
		case !errors.Is(err, syscall.ESRCH):
			t.Fatalf("killing worker-1's sshd (pid %d): %v", pid, err)
		}
	}
	if killed == 0 {
		t.Fatalf("every process of worker-1's sshd %v had ended before its kill; pods:\n%s", sshd, e.podSummary(t))
	}
	t.Logf("killed worker-1's sshd and the processes under it %v from the node (%d still there)", sshd, killed)

	// The scenario needs mpirun to fail and be restarted in place before the job restart
	// replaces the launcher: the decision on worker-1's exit 1 waits 10 s for its peers.
	testutil.Eventually(t, time.Minute, "the launcher restarted in place", func(ctx context.Context) (bool, error) {
		pod, err := e.c.Client.CoreV1().Pods(e.namespace).Get(ctx, launcher.Name, metav1.GetOptions{})
		if err != nil || pod.UID != launcher.UID {
			return false, fmt.Errorf("the first launcher went before it restarted in place: %v", err)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				t.Logf("the launcher restarted in place %d times after exit %d", cs.RestartCount, exitOf(cs.LastTerminationState))
				return true, nil
			}
		}
		return false, nil
	}, func() string { return e.podSummary(t) })

	wf := e.waitForWorkflow(t, name, 5*time.Minute, "Succeeded", "Failed", "Error")
	train := podNode(t, wf, "train")
	stepLog := e.logOf(t, e.podOfNode(t, wf, train).Name, "main")
	if phaseOf(wf) != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, want Succeeded; nodes:\n%s\nthe train step's log:\n%s", name, phaseOf(wf), nodeSummary(wf), lastLines(stepLog, 60))
	}
	if got := param(t, train.Outputs.Parameters, "restarts"); got != "1" {
		t.Errorf("train output restarts = %s, want 1: worker-1's failure restarts the job once, and the launcher's failure with it is collateral", got)
	}
	checkJobRestartLogged(t, stepLog, "worker-1 exit 1")
	if n := strings.Count(stepLog, "every worker is Ready; creating the launcher"); n != 2 {
		t.Errorf("the step's log says %d times that the launcher was created once the workers were Ready, want 2 (one per job attempt):\n%s", n, lastLines(stepLog, 60))
	}
	job := param(t, train.Outputs.Parameters, "job-name")
	for rank := 0; rank < 2; rank++ {
		want := fmt.Sprintf("rank %d of 2 on %s-worker-%d: sum of ranks 1", rank, job, rank)
		if !strings.Contains(stepLog, want) {
			t.Errorf("the train step's log lacks the second attempt's line %q:\n%s", want, lastLines(stepLog, 60))
		}
	}
}

// launcherPod is the job's launcher pod (the namespace holds one job).
func (e *e2e) launcherPod(ctx context.Context, t *testing.T) *corev1.Pod {
	t.Helper()
	pods, err := e.c.Client.CoreV1().Pods(e.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if strings.HasSuffix(pods.Items[i].Name, "-launcher-0") {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no launcher pod; pods:\n%s", e.podSummary(t))
	return nil
}

func exitOf(s corev1.ContainerState) int32 {
	if s.Terminated == nil {
		return -1
	}
	return s.Terminated.ExitCode
}

// processesWith finds the processes of this host whose command line starts with part and,
// unless pod is empty, whose environment's POD_NAME is pod (the pods of the tests that
// run beside it have other names).
func processesWith(part, pod string) []int {
	return hostProcesses(func(cmdline string, environ []string) bool {
		if !strings.HasPrefix(cmdline, part) {
			return false
		}
		return pod == "" || slices.Contains(environ, "POD_NAME="+pod)
	})
}

// descendantsOf lists the processes of this host below pid.
func descendantsOf(pid int) []int {
	parents := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		child, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			if ppid, err := strconv.Atoi(fields[1]); err == nil {
				parents[child] = ppid
			}
		}
	}
	var found []int
	for child := range parents {
		for p := parents[child]; p > 1; p = parents[p] {
			if p == pid {
				found = append(found, child)
				break
			}
		}
	}
	return found
}
