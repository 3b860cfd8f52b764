package local

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainstep/trainstep/internal/testutil"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/spec"
)

// loadJob defaults and validates a manifest as `trainstep run --local` does.
func loadJob(t *testing.T, manifest string) *v1alpha1.TrainJob {
	t.Helper()
	job, _, err := spec.Load([]byte(manifest), spec.Options{Policy: replicapolicy.Policy{Local: true}})
	if err != nil {
		t.Fatalf("loading the job: %v", err)
	}
	return job
}

// shellJob is a TensorFlow-framework job whose replicas run a shell script.
// Each type is "Type: replicas, restartPolicy, script".
type shellReplicas struct {
	typ           string
	replicas      int
	restartPolicy string
	script        string
	extra         string // more replica spec fields, indented by 6 spaces
}

func shellJob(name, runPolicy string, types ...shellReplicas) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: trainstep.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: %s}\nspec:\n  framework: tensorflow\n  replicaSpecs:\n", name)
	for _, r := range types {
		fmt.Fprintf(&b, "    %s:\n      replicas: %d\n      restartPolicy: %s\n%s      template:\n        spec:\n          containers:\n          - name: tensorflow\n            image: busybox\n            command: [sh, -c, %s]\n",
			r.typ, r.replicas, r.restartPolicy, r.extra, strconv.Quote(r.script))
	}
	if runPolicy != "" {
		fmt.Fprintf(&b, "  runPolicy: %s\n", runPolicy)
	}
	return b.String()
}

// run is one Run with its logs captured.
type run struct {
	outcome Outcome
	err     error
	logs    *observer.ObservedLogs
	output  *testutil.SyncBuffer
}

func runJob(t *testing.T, ctx context.Context, job *v1alpha1.TrainJob, tweak func(*Options)) run {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	out := &testutil.SyncBuffer{}
	opts := Options{Job: job, LogOutput: out, Logger: zap.New(core), RestartDelay: 100 * time.Millisecond, MaxStopGrace: 5 * time.Second}
	if tweak != nil {
		tweak(&opts)
	}
	outcome, err := Run(ctx, opts)
	return run{outcome: outcome, err: err, logs: logs, output: out}
}

// pgids lists the process groups the run started, from its log.
func (r run) pgids() []int {
	var out []int
	for _, e := range r.logs.FilterMessage("replica started").All() {
		out = append(out, int(e.ContextMap()["pgid"].(int64)))
	}
	return out
}
