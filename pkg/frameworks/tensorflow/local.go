package tensorflow

import (
	"encoding/json"
	"fmt"

	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// LocalValue implements framework.Local: TF_CONFIG, and the cluster it
// takes from the job's ConfigMap, get every address of their cluster
// pointed at the replica's local port; the rest of the document stays.
func (Framework) LocalValue(name, value string, _ framework.ReplicaRef, _ func(string) (string, bool), peers framework.Peers) (string, bool, string) {
	var rewritten string
	var err error
	switch name {
	case EnvTFCluster:
		rewritten, err = localCluster(value, peers)
	case EnvTFConfig:
		rewritten, err = localConfig(value, peers)
	default:
		return "", false, ""
	}
	if err != nil {
		return value, true, fmt.Sprintf("%s is left as it is: %v", name, err)
	}
	return rewritten, true, ""
}

// localConfig points every address of TF_CONFIG's cluster at the local
// ports, keeping the rest of the document as it is.
func localConfig(value string, peers framework.Peers) (string, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(value), &doc); err != nil {
		return value, fmt.Errorf("reading %s: %w", EnvTFConfig, err)
	}
	raw, ok := doc["cluster"]
	if !ok {
		return value, nil
	}
	rewritten, err := localCluster(string(raw), peers)
	if err != nil {
		return value, err
	}
	doc["cluster"] = json.RawMessage(rewritten)
	out, err := json.Marshal(doc)
	if err != nil {
		return value, fmt.Errorf("encoding %s: %w", EnvTFConfig, err)
	}
	return string(out), nil
}

// localCluster points every address of a TF_CONFIG cluster (the cluster
// ConfigMap's value) at the local ports.
func localCluster(value string, peers framework.Peers) (string, error) {
	var cluster map[string][]string
	if err := json.Unmarshal([]byte(value), &cluster); err != nil {
		return value, fmt.Errorf("reading %s cluster: %w", EnvTFConfig, err)
	}
	for task, addrs := range cluster {
		for i, addr := range addrs {
			cluster[task][i], _ = peers.Address(addr)
		}
	}
	rewritten, err := json.Marshal(cluster)
	if err != nil {
		return value, fmt.Errorf("encoding %s cluster: %w", EnvTFConfig, err)
	}
	return string(rewritten), nil
}
