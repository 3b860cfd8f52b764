package e2e_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// crashLoopWorkflow trains a job whose one worker exits 132 at once, under restartPolicy
// OnFailure: its pod stays Running while the real kubelet backs off before restarting the
// container, and the job (JAX: collective) restarts as a whole, until backoffLimit.
const crashLoopWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: crashloop-
spec:
  entrypoint: main
  templates:
    - name: main
      dag:
        tasks:
          - name: train
            templateRef: {name: trainstep, template: train}
            arguments:
              parameters:
                - name: job
                  value: |
                    apiVersion: trainstep.dev/v1alpha1
                    kind: TrainJob
                    metadata:
                      name: crashloop
                    spec:
                      framework: jax
                      replicaSpecs:
                        Worker:
                          replicas: 1
                          restartPolicy: OnFailure
                          template:
                            spec:
                              securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
                              containers:
                                - name: jax
                                  image: "%s"
                                  command: [python, -c, "import sys; sys.exit(132)"]
                                  securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
                      runPolicy:
                        backoffLimit: 1
`

// TestRealNodeCrashLoopIsVisibleAndBounded runs a worker that crashes at once on the real
// kubelet: while its container is down in a Running pod the step's progress line does not
// count it as running but names it with its exit code and restarts, and backoffLimit ends
// the step Failed with a message that counts the restarts the restarts output counts.
func TestRealNodeCrashLoopIsVisibleAndBounded(t *testing.T) {
	t.Parallel()
	e := setUp(t)
	started := time.Now()
	name := e.submit(t, workflowFromYAML(t, fmt.Sprintf(crashLoopWorkflow, pythonImage)))
	wf := e.waitForWorkflow(t, name, 5*time.Minute, "Succeeded", "Failed", "Error")
	t.Logf("Workflow %s ended %s in %s", name, phaseOf(wf), time.Since(started).Round(100*time.Millisecond))
	if phaseOf(wf) != "Failed" {
		t.Fatalf("Workflow %s: phase %s, want Failed; nodes:\n%s", name, phaseOf(wf), nodeSummary(wf))
	}
	train := podNode(t, wf, "train")
	if got := param(t, train.Outputs.Parameters, "reason"); got != "BackoffLimitExceeded" {
		t.Errorf("train's reason output = %q, want BackoffLimitExceeded", got)
	}
	stepLog := e.logOf(t, e.podOfNode(t, wf, train).Name, "main")
	if crashLooping := regexp.MustCompile(`worker 0/1 running, 1 crash-looping \(worker-0 exit 132, \d+ restarts\)`); !crashLooping.MatchString(stepLog) {
		t.Errorf("the step's log never says %s:\n%s", crashLooping, lastLines(stepLog, 30))
	}
	restarts := param(t, train.Outputs.Parameters, "restarts")
	inPlace := "the job restarted " + restarts + " times, more than backoffLimit=1"
	recreated := "the job failed again after " + restarts + " restarts, and backoffLimit=1 allows no more"
	if restarts == "0" || !strings.Contains(stepLog, `"message":"`+inPlace) && !strings.Contains(stepLog, `"message":"`+recreated) {
		t.Errorf("restarts output %s; the step's result does not count them (%q or %q):\n%s", restarts, inPlace, recreated, lastLines(stepLog, 5))
	}
}
