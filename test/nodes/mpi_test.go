package nodes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
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
	// An earlier test may have killed or partitioned a node: the spread
	// counts only nodes that are Ready and untainted.
	testutil.Eventually(t, 3*time.Minute, "both nodes Ready and untainted", func() bool {
		for _, name := range []string{cluster.RealNodeName, secondNode} {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(n.Spec.Taints) > 0 || !nodeReady(n) {
				return false
			}
		}
		return true
	})
	d := &testJob{c: c, ns: c.Namespace(t), name: "mpi", manifest: []byte(mpiJob)}
	o := d.start(t, 0)()
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

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
