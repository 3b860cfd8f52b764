// Package controlplane_test proves what a run of `trainstep run` makes of
// the control plane's own faults, on a test cluster of its own (KWOK
// nodes): kube-apiserver killed and started again under a running job,
// during its launch and during its teardown, and away past the API
// timeout; etcd compacted under the informers' open watches; API Priority
// and Fairness rejecting the step's requests with 429s. Its tests run one
// at a time: they restart the cluster's API server.
package controlplane_test

import (
	"testing"

	"github.com/trainstep/trainstep/test/cluster"
)

// The cluster serves watches from etcd, not from kube-apiserver's watch
// cache: a watch that starts again from a compacted revision then meets
// etcd's compaction, which kube-apiserver answers 410 Gone.
func TestMain(m *testing.M) {
	cluster.MainWith(m, cluster.Options{APIServerArgs: []string{"--watch-cache=false"}})
}
