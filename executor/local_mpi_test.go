package executor

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainstep/trainstep/pkg/backend/local/proctest"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/spec"
)

// ranksProgram is a tiny MPI program: every rank sums all ranks with an
// all-reduce, writes "<size> <sum>" to <dir>/rank-<rank> and says so.
const ranksProgram = `#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
	int rank, size, sum = 0;
	char path[4096];
	FILE *f;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	snprintf(path, sizeof path, "%s/rank-%d", argv[1], rank);
	f = fopen(path, "w");
	if (f == NULL) { MPI_Abort(MPI_COMM_WORLD, 3); }
	fprintf(f, "%d %d\n", size, sum);
	fclose(f);
	printf("rank %d of %d: sum of ranks %d\n", rank, size, sum);
	MPI_Finalize();
	return 0;
}
`

// mpiJob is MPI Operator v2's pi example (kubeflow/mpi-operator
// examples/v2beta1/pi/pi.yaml) with two slots per worker and the
// launcher running the ranks program.
const mpiJob = `
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: ranks
spec:
  slotsPerWorker: 2
  runPolicy:
    cleanPodPolicy: Running
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - image: mpioperator/mpi-pi:openmpi
            name: mpi-launcher
            command: [mpirun]
            args: [-n, "%d", "%s", "%s"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - image: mpioperator/mpi-pi:openmpi
            name: mpi-worker
            command: [/usr/sbin/sshd]
            args: [-De]
`

// requireMPI returns whether OpenMPI's tools are here. make test installs
// them (make test-deps), so under CI their absence fails the test.
func requireMPI(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"mpirun", "mpicc"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("%s is not installed: install OpenMPI (Debian: apt-get install openmpi-bin libopenmpi-dev) to run the local MPI test", tool)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

func TestMPIJobRunsEveryRankWithRealMPIRun(t *testing.T) {
	requireMPI(t)
	dir := t.TempDir()
	source, program, ranksDir := filepath.Join(dir, "ranks.c"), filepath.Join(dir, "ranks"), filepath.Join(dir, "out")
	if err := os.WriteFile(source, []byte(ranksProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ranksDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mpicc", "-o", program, source).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}

	const ranks = 4 // 2 workers × 2 slots
	manifest := fmt.Sprintf(mpiJob, ranks, program, ranksDir)
	r := runLocally(t, t.Context(), []byte(manifest), spec.Options{}, watchLog())
	if r.err != nil || r.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s, error %v\n%s", r.res.Phase, r.err, r.stderr)
	}
	for rank := 0; rank < ranks; rank++ {
		got, err := os.ReadFile(filepath.Join(ranksDir, fmt.Sprintf("rank-%d", rank)))
		if err != nil {
			t.Errorf("rank %d did not run: %v", rank, err)
			continue
		}
		if want := fmt.Sprintf("%d %d\n", ranks, ranks*(ranks-1)/2); string(got) != want {
			t.Errorf("rank %d wrote %q, want %q", rank, got, want)
		}
	}
	if !strings.Contains(r.stderr.String(), fmt.Sprintf("[launcher-0] rank 0 of %d", ranks)) {
		t.Errorf("the launcher's output lacks rank 0's line:\n%s", r.stderr)
	}
	if started := r.logs.FilterMessage("replica started").Len(); started != 1 {
		t.Errorf("%d processes started, want only the launcher (workers are slots)", started)
	}
	var replicas []result.ReplicaStatus
	if err := json.Unmarshal([]byte(r.output(t, "replicas.json")), &replicas); err != nil {
		t.Fatal(err)
	}
	if len(replicas) != 3 {
		t.Errorf("replicas.json lists %d replicas, want the launcher and 2 workers: %+v", len(replicas), replicas)
	}
	proctest.AssertNoneLeft(t, r.pgids())
}

func TestMPIRunNeedsEnoughSlots(t *testing.T) {
	requireMPI(t)
	dir := t.TempDir()
	// 5 ranks on 2 workers × 2 slots: mpirun refuses, as it would on a
	// cluster. (The launcher's OnFailure would retry it without end.)
	manifest := fmt.Sprintf(mpiJob, 5, "true", dir)
	r := runLocally(t, t.Context(), []byte(manifest), spec.Options{Sets: []string{"spec.runPolicy.backoffLimit=0"}}, watchLog())
	if r.res.Phase != result.PhaseFailed {
		t.Fatalf("phase %s, want Failed: mpirun must not find a fifth slot\n%s", r.res.Phase, r.stderr)
	}
}
