package nodes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trainstep/trainstep/test/cluster"
)

// mpiImage holds this machine's OpenMPI, ssh and sshd, and the all-reduce program.
const mpiImage = "docker.io/local/openmpi:nodes"

// mpiJob is an OpenMPI TrainJob whose launcher's mpirun starts one rank on each of two
// workers over SSH (the workers run trainstep's default sshd), the workers spread over the
// two nodes as the DDP job's ranks are.
const mpiJob = `
apiVersion: trainstep.dev/v1alpha1
kind: TrainJob
metadata: {name: mpi}
spec:
  framework: mpi
  slotsPerWorker: 1
  launcherCreationPolicy: WaitForWorkersReady
  replicaSpecs:
    Launcher:
      template:
        spec:
          containers:
            - name: mpi-launcher
              image: ` + mpiImage + `
              imagePullPolicy: Never
              command: [mpirun]
              args: [-n, "2", ` + cluster.MPIAllReduceProgramPath + `]
              env:
                - {name: OMPI_ALLOW_RUN_AS_ROOT, value: "1"}
                - {name: OMPI_ALLOW_RUN_AS_ROOT_CONFIRM, value: "1"}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - {name: mpi-worker, image: ` + mpiImage + `, imagePullPolicy: Never}
          topologySpreadConstraints:
            - maxSkew: 1
              topologyKey: kubernetes.io/hostname
              whenUnsatisfiable: DoNotSchedule
              nodeTaintsPolicy: Honor
              labelSelector: {matchLabels: {trainstep.dev/job-name: mpi, trainstep.dev/replica-type: worker}}
  runPolicy:
    backoffLimit: 0
    cleanPodPolicy: All
`

// TestRealNodesMPIAcrossNodes runs a real mpirun whose two ranks run on workers on different
// nodes: the launcher reaches both workers' sshd by the hostfile's names, across the nodes
// for at least one of them, and the ranks all-reduce between the nodes.
func TestRealNodesMPIAcrossNodes(t *testing.T) {
	t.Parallel()
	c := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	files, err := cluster.OpenMPIImageFiles(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ImportHostFilesImage(ctx, mpiImage, files); err != nil {
		t.Fatal(err)
	}
	t.Logf("OpenMPI image built and imported into both nodes in %s", time.Since(started).Round(100*time.Millisecond))
	bothNodesUp(t, c)
	d := &testJob{c: c, ns: c.Namespace(t), name: "mpi", manifest: []byte(mpiJob)}
	o := d.start(t, 0).wait(t)
	if o.err != nil || o.res.Phase != "Succeeded" {
		t.Fatalf("run: phase %s (%s: %s), error %v; want Succeeded; replicas' log:\n%s", o.res.Phase, o.res.Reason, o.res.Message, o.err, lastLines(o.stderr.String(), 40))
	}
	for rank := range 2 {
		want := fmt.Sprintf("rank %d of 2 on mpi-worker-%d: sum of ranks 1", rank, rank)
		if !strings.Contains(o.stderr.String(), want) {
			t.Errorf("the replicas' log lacks %q:\n%s", want, lastLines(o.stderr.String(), 40))
		}
	}
	workerNodes := map[string]bool{}
	for _, r := range o.res.Replicas {
		if strings.EqualFold(r.Type, "worker") {
			workerNodes[r.Node] = true
		}
	}
	if !workerNodes[cluster.RealNodeName] || !workerNodes[secondNode] {
		t.Errorf("workers ran on %v, want one on each of %s and %s", workerNodes, cluster.RealNodeName, secondNode)
	}
	if o.res.Restarts != 0 {
		t.Errorf("restarts = %d, want 0", o.res.Restarts)
	}
}
