package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nodeRecords is where every real node on this machine is recorded while it exists, so that
// the leftovers of a test process killed outright (SIGKILL, a panic on timeout) — its pods'
// containers, mounts and network namespace, which outlive it — are removed by the next
// start of a real node. /run is emptied on reboot, like the namespaces.
const nodeRecords = "/run/trainstep/real-nodes"

// nodeRecord is one real node's entry in nodeRecords.
type nodeRecord struct {
	Node nodeState `json:"node"`
	// OwnerPID and OwnerStart (its start time in clock ticks since boot) identify the
	// process whose Stop tears the node down; a detached node has none (make cluster-down
	// tears it down).
	OwnerPID   int    `json:"ownerPID,omitempty"`
	OwnerStart string `json:"ownerStart,omitempty"`
	// ClusterDir is removed with the node when the owner would have removed it.
	ClusterDir       string `json:"clusterDir,omitempty"`
	RemoveClusterDir bool   `json:"removeClusterDir,omitempty"`
}

// recordPath is the node's entry in nodeRecords.
func (s nodeState) recordPath() string {
	return filepath.Join(nodeRecords, s.Network.Namespace+".json")
}

// recordNode writes (or rewrites) n's entry, owned by this process unless the cluster is
// detached.
func (c *Cluster) recordNode(n *realNode) error {
	rec := nodeRecord{Node: n.nodeState}
	if !c.detached {
		rec.OwnerPID = os.Getpid()
		rec.OwnerStart = processStart(rec.OwnerPID)
		rec.ClusterDir, rec.RemoveClusterDir = c.Dir, c.removeDir
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err == nil {
		err = os.MkdirAll(nodeRecords, 0o700)
	}
	if err == nil {
		err = os.WriteFile(n.recordPath(), data, 0o600)
	}
	if err != nil {
		return fmt.Errorf("recording the real node in %s: %w", nodeRecords, err)
	}
	return nil
}

// SweepRealNodes tears down every real node on this machine whose owning test process has
// gone without stopping it, and returns the network namespaces it removed. Start calls it
// before it creates a real node. Nodes of live processes and detached ones (make
// cluster-up) are left alone.
func SweepRealNodes() ([]string, error) {
	entries, err := os.ReadDir(nodeRecords)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", nodeRecords, err)
	}
	var records []nodeRecord
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(nodeRecords, e.Name()))
		if err != nil {
			continue // removed meanwhile by its owner
		}
		var rec nodeRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", filepath.Join(nodeRecords, e.Name()), err)
		}
		records = append(records, rec)
	}
	var orphans []nodeRecord
	live := 0
	for _, rec := range records {
		if rec.OwnerPID == 0 || processStart(rec.OwnerPID) == rec.OwnerStart {
			live++
		} else {
			orphans = append(orphans, rec)
		}
	}
	var swept []string
	var errs []error
	for _, rec := range orphans {
		node := rec.Node
		if live > 0 {
			// A running kubelet set the sysctls just the same; the values from before the
			// orphan's are not known to be the machine's own.
			node.Sysctls = nil
		}
		// Its kubelet and containerd died with it (Pdeathsig); whatever it started that
		// still runs mentions the node's directory.
		if err := node.tearDown(func(string) {}); err != nil {
			errs = append(errs, fmt.Errorf("removing the leftovers of real node %s: %w", node.Network.Namespace, err))
			continue
		}
		if rec.RemoveClusterDir && rec.ClusterDir != "" {
			if err := os.RemoveAll(rec.ClusterDir); err != nil {
				errs = append(errs, err)
			}
		}
		swept = append(swept, node.Network.Namespace)
	}
	return swept, errors.Join(errs...)
}

// processStart is pid's start time (clock ticks since boot) from /proc, or "" when there is
// no such process: with the pid it tells a process from a later one that reuses the pid.
func processStart(pid int) string {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	// Fields after the parenthesised command name; starttime is the 22nd field overall.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}
