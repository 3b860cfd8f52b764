// Command testcluster starts and stops the test cluster in the background for people
// (make cluster-up / make cluster-down): the same etcd, kube-apiserver, controllers,
// scheduler and kwok that integration tests use, with four KWOK nodes, and with --real-node
// the real node (a kubelet with containerd) too; --real-nodes 2 starts a second one.
// It is a developer tool only; nothing in the product calls it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/trainstep/trainstep/test/cluster"
)

const usage = `usage: testcluster up|down [--bin DIR] [--real-node | --real-nodes N] [--argo]

  up    start the test cluster in the background (admin kubeconfig: DIR/kubeconfig);
        --real-node adds a kubelet with containerd (root, make cluster-bin-node),
        --real-nodes N adds N of them (real-node, real-node-2, ...), each in a network
        namespace of its own, --argo Argo's workflow controller on the first
        (make cluster-bin-argo)
  down  stop it and remove its files
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	command := os.Args[1]
	flags := flag.NewFlagSet("testcluster", flag.ExitOnError)
	binDir := flags.String("bin", cluster.DefaultBinDir(), "directory with the cluster binaries (make cluster-bin)")
	realNode := flags.Bool("real-node", false, "also start the real node (a kubelet with containerd)")
	realNodes := flags.Int("real-nodes", 0, "how many real nodes to start (--real-node is 1)")
	argo := flags.Bool("argo", false, "also start Argo's workflow controller (needs --real-node)")
	_ = flags.Parse(os.Args[2:])

	var err error
	switch command {
	case "up":
		count := *realNodes
		if *realNode {
			count = max(count, 1)
		}
		err = up(*binDir, count, *argo)
	case "down":
		err = down(*binDir)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		os.Exit(1)
	}
}

func stateFile(binDir string) string { return filepath.Join(binDir, "cluster-state.json") }

func up(binDir string, realNodes int, argo bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	state, recorded, err := cluster.ReadDetachedState(stateFile(binDir))
	if err != nil {
		return err
	}
	if recorded && state.Ready(ctx) {
		fmt.Printf("The test cluster is already up (since %s).\n", state.StartedAt.Format(time.Kitchen))
		printHowTo(state.Kubeconfig, state.Dir)
		return nil
	}
	if recorded {
		fmt.Println("Cleaning up a test cluster that is no longer answering.")
		if err := cluster.StopDetached(stateFile(binDir)); err != nil {
			return err
		}
	}
	runDir := filepath.Join(binDir, "run")
	if err := os.RemoveAll(runDir); err != nil {
		return fmt.Errorf("clearing %s: %w", runDir, err)
	}
	started := time.Now()
	c, err := cluster.StartDetached(ctx, cluster.Options{
		BinDir:         binDir,
		Dir:            runDir,
		KubeconfigPath: filepath.Join(binDir, "kubeconfig"),
		Nodes:          cluster.DefaultNodes(),
		RealNodes:      realNodes,
		Argo:           argo,
	}, stateFile(binDir))
	if err != nil {
		return fmt.Errorf("starting the test cluster: %w", err)
	}
	fmt.Printf("The test cluster is up (%s to ready) with 4 KWOK nodes of 8 cpu, 32Gi, 110 pods, 8 nvidia.com/gpu.\n",
		time.Since(started).Round(100*time.Millisecond))
	for _, node := range c.RealNodes() {
		fmt.Printf("The real node %s is Ready: node IP %s in network namespace %s, pods in %s, API server at %s.\n",
			node.Name, node.NodeIP, node.Namespace, node.PodCIDR, c.Server)
		fmt.Printf("  its containerd: ctr --address %s -n k8s.io images ls\n", relative(node.ContainerdSocket))
	}
	if argo {
		fmt.Printf("Argo's workflow controller runs on it (namespace %s); workflow pods use %s.\n", cluster.ArgoNamespace, cluster.ArgoExecutorImage)
	}
	printHowTo(c.Kubeconfig, c.Dir)
	return nil
}

func down(binDir string) error {
	_, recorded, err := cluster.ReadDetachedState(stateFile(binDir))
	if err != nil {
		return err
	}
	if !recorded {
		fmt.Println("The test cluster is not running.")
		return nil
	}
	if err := cluster.StopDetached(stateFile(binDir)); err != nil {
		return err
	}
	fmt.Println("The test cluster is stopped.")
	return nil
}

func printHowTo(kubeconfig, dir string) {
	fmt.Printf(`
  KUBECONFIG=%s kubectl get nodes
  component logs:  %s
  pod behaviour:   kwok.trainstep.dev/exit-after, exit-code, termination-message,
                   exit-times and waiting-reason annotations (docs/development.md, "Test cluster")
  stop it with:    make cluster-down
`, relative(kubeconfig), relative(filepath.Join(dir, "logs")))
}

// relative shortens path against the working directory when that reads better.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !filepath.IsAbs(rel) && len(rel) < len(path) && rel[0] != '.' {
		return rel
	}
	return path
}
