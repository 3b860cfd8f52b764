package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// DetachedState is what a detached cluster (make cluster-up) records so that a later
// process can find and stop it.
type DetachedState struct {
	Dir           string         `json:"dir"`
	BinDir        string         `json:"binDir"`
	Kubeconfig    string         `json:"kubeconfig"`
	Server        string         `json:"server"`
	ProcessGroups map[string]int `json:"processGroups"`
	// Executables are the components' programs, each process group's leader runs.
	Executables map[string]string `json:"executables,omitempty"`
	// Nodes are the real nodes (Options.RealNode, Options.RealNodes).
	Nodes []*nodeState `json:"nodes,omitempty"`
	// Node is where a cluster recorded before there could be more than one real node kept
	// its one.
	Node      *nodeState `json:"node,omitempty"`
	StartedAt time.Time  `json:"startedAt"`
}

// StartDetached starts a cluster whose processes outlive this one and records it in
// stateFile. opts.Dir must be set: the cluster keeps running from it.
func StartDetached(ctx context.Context, opts Options, stateFile string) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("starting a detached cluster: Options.Dir is required")
	}
	opts.Detached = true
	c, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	state := DetachedState{
		Dir: c.Dir, BinDir: c.BinDir, Kubeconfig: c.Kubeconfig, Server: c.Server,
		ProcessGroups: c.processGroups(), Executables: c.executables(), StartedAt: time.Now(),
	}
	for _, n := range c.nodes {
		state.Nodes = append(state.Nodes, &n.nodeState)
	}
	data, err := json.MarshalIndent(state, "", "  ")
	if err == nil {
		err = os.WriteFile(stateFile, data, 0o644)
	}
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("recording the cluster in %s: %w", stateFile, err)
	}
	return c, nil
}

// ReadDetachedState reads stateFile; ok is false when there is none.
func ReadDetachedState(stateFile string) (state DetachedState, ok bool, err error) {
	data, err := os.ReadFile(stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return DetachedState{}, false, nil
	}
	if err != nil {
		return DetachedState{}, false, fmt.Errorf("reading %s: %w", stateFile, err)
	}
	if err := json.Unmarshal(data, &state); err != nil {
		return DetachedState{}, false, fmt.Errorf("parsing %s: %w", stateFile, err)
	}
	return state, true, nil
}

// Ready reports whether the recorded cluster's kube-apiserver answers /readyz.
func (s DetachedState) Ready(ctx context.Context) bool {
	config, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return false
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return false
	}
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && string(body) == "ok"
}

// StopDetached stops the cluster recorded in stateFile (kube-apiserver's clients first,
// etcd last), then removes its directory, kubeconfig and stateFile. A process group is
// only signalled while its leader is still the recorded binary, so a stale state file
// (say, after a reboot) never kills an unrelated process.
func StopDetached(stateFile string) error {
	state, ok, err := ReadDetachedState(stateFile)
	if err != nil || !ok {
		return err
	}
	stop := func(name string) {
		pgid := state.ProcessGroups[name]
		exe := state.Executables[name]
		if exe == "" {
			exe = filepath.Join(state.BinDir, name)
		}
		if pgid > 0 && runsBinary(pgid, exe) {
			stopProcessGroup(pgid, stopGrace, nil)
		}
	}
	nodes := state.Nodes
	if state.Node != nil {
		nodes = append(nodes, state.Node)
	}
	var nodeErrs []error
	for _, node := range slices.Backward(nodes) {
		nodeErrs = append(nodeErrs, node.tearDown(stop))
	}
	nodeErr := errors.Join(nodeErrs...)
	order := [][]string{{"kwok", "kube-scheduler", "kube-controller-manager"}, {"kube-apiserver"}, {"etcd"}}
	for _, names := range order {
		for _, name := range names {
			stop(name)
		}
	}
	if nodeErr != nil {
		// A mount may be left in the directory: keep it, and the state to retry with.
		return fmt.Errorf("stopping the real node: %w", nodeErr)
	}
	for _, path := range []string{state.Dir, state.Kubeconfig, stateFile} {
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("removing %s: %w", path, err)
		}
	}
	return nil
}

// runsBinary reports whether process pid executes binary.
func runsBinary(pid int, binary string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(binary)
	if err != nil {
		want = binary
	}
	return exe == want || exe == binary
}
