// Package nodes_test proves trainstep across machines: real PyTorch DDP (Debian's
// python3-torch, gloo on CPU) with its ranks on two real nodes of the test cluster, and what
// happens to such a job when the node of one of its ranks really dies (KillRealNode: off the
// network, every process killed, the Lease no longer renewed), when its Node object is deleted
// as a cloud provider would, and when a partition heals. trainstep runs in-process against
// the cluster with the flags of `trainstep run`; its replicas are real containers.
//
// The package's tests share one cluster with two real nodes and Argo's workflow controller,
// started by the first test that needs it, and a short node lifecycle (the node lifecycle
// controller's grace period is nodeGrace). The tests that kill, partition or delete a node
// run one at a time; those that only need both nodes up run in parallel after them. They
// need the real node and Argo: `make test` runs them (as root); without
// TRAINSTEP_REAL_NODE=1 they skip, and under CI=true they fail instead.
package nodes_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

const (
	// nodeGrace is the node lifecycle controller's grace period: a node whose kubelet is
	// silent this long is marked NotReady and tainted unreachable.
	nodeGrace = 20 * time.Second
	// secondNode is the cluster's second real node.
	secondNode = cluster.RealNodeName + "-2"
	// torchImage holds this machine's python3, Debian's python3-torch and the DDP training.
	torchImage = "docker.io/local/torch:nodes"
	// trainScript is where the DDP training (executor/testdata/ddp_train.py) is in torchImage.
	trainScript = "/train/ddp_train.py"
	// elasticScript is where the elastic training (executor/testdata/elastic_train.py) is.
	elasticScript = "/train/elastic_train.py"
	// checkpointScript is where the shipped checkpoint-on-notice training
	// (workflows/checkpoint/ddp_checkpoint.py) is.
	checkpointScript = "/train/ddp_checkpoint.py"
)

// shared is the package's cluster, started on first use and stopped by TestMain.
var shared struct {
	once sync.Once
	c    *cluster.Cluster
	err  error
	// before is the machine as it was before the cluster started, to compare after Stop.
	before cluster.MachineState
}

// TestMain stops the shared cluster after the tests, also when `go test` is interrupted (a
// killed one relies on the cluster's Pdeathsig and its sweep of leftover real nodes), and
// then fails the package if anything of the two nodes is left on the machine, a node that
// was killed and booted again included.
func TestMain(m *testing.M) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "%s: stopping the test cluster; tests still running will fail\n", sig)
		if shared.c != nil {
			shared.c.Stop()
		}
		os.Exit(1)
	}()
	code := m.Run()
	if shared.c != nil {
		nodes := shared.c.RealNodes()
		shared.c.Stop()
		if err := cluster.LeftAfterStop(shared.c.Dir, nodes, shared.before); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: the cluster with two real nodes left things behind: %v\n", err)
			code = 1
		}
	}
	if trainstepImage.done != nil {
		<-trainstepImage.done
		_ = os.Remove(trainstepImage.archive)
	}
	os.Exit(code)
}

// twoNodes hands the test the shared cluster with two Ready real nodes, starting it on first
// use. When the test fails, its output ends with the end of every component's log.
func twoNodes(t *testing.T) *cluster.Cluster {
	t.Helper()
	binDir := cluster.RequireArgo(t)
	shared.once.Do(func() { shared.err = startShared(t, binDir) })
	if shared.err != nil {
		t.Fatalf("the shared cluster: %v", shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs:\n%s", shared.c.LogTails(40))
		}
	})
	return shared.c
}

// startShared starts the cluster with two real nodes and Argo, imports the torch image into
// both nodes, and starts building trainstep's image for the Argo test. The torch image's
// archive is written while the cluster starts: only its import needs the nodes.
func startShared(t *testing.T, binDir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before, err := cluster.ReadMachineState()
	if err != nil {
		return err
	}
	shared.before = before
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	started := time.Now()
	archive := filepath.Join(os.TempDir(), fmt.Sprintf("trainstep-nodes-torch-%d.tar", os.Getpid()))
	defer os.Remove(archive)
	written := make(chan error, 1)
	go func() {
		files, err := cluster.TorchImageFiles(map[string]string{
			trainScript:      filepath.Join(root, "executor", "testdata", "ddp_train.py"),
			elasticScript:    filepath.Join(root, "executor", "testdata", "elastic_train.py"),
			checkpointScript: filepath.Join(root, "workflows", "checkpoint", "ddp_checkpoint.py"),
		})
		if err == nil {
			err = cluster.WriteHostFilesImage(archive, torchImage, files)
		}
		t.Logf("torch image written in %s", time.Since(started).Round(100*time.Millisecond))
		written <- err
	}()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, RealNodes: 2, Argo: true, NodeMonitorGracePeriod: nodeGrace})
	if err != nil {
		<-written
		return fmt.Errorf("starting a cluster with two real nodes and Argo: %w", err)
	}
	shared.c = c
	t.Logf("cluster with two real nodes ready in %s (%s)", time.Since(started).Round(10*time.Millisecond), c.StartupSummary())
	if err := <-written; err != nil {
		return err
	}
	if err := c.ImportImage(ctx, archive); err != nil {
		return err
	}
	t.Logf("torch image imported into both nodes %s after the start", time.Since(started).Round(100*time.Millisecond))
	buildTrainstepImage(root)
	return nil
}

// bothNodesUp waits until both real nodes are Ready and untainted: an earlier test may have
// killed, partitioned or deleted one, and a topology spread counts only the nodes whose
// taints the pods tolerate.
func bothNodesUp(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	testutil.Eventually(t, 3*time.Minute, "both nodes Ready and untainted", func(ctx context.Context) (bool, error) {
		for _, name := range []string{cluster.RealNodeName, secondNode} {
			n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(n.Spec.Taints) > 0 || !nodeReady(n) {
				return false, err
			}
		}
		return true, nil
	})
}

func nodeReady(n *corev1.Node) bool {
	ready := readyCondition(n)
	return ready != nil && ready.Status == corev1.ConditionTrue
}

// readyCondition is the node's Ready condition (nil before the kubelet first reported it).
func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == key {
			return true
		}
	}
	return false
}
