// Package gang_test proves gang scheduling, priority and queues on the real
// test cluster: the kube-scheduler places replicas on KWOK nodes of limited
// capacity, and trainstep must start a job all together or not at all.
//
// Every test adds its own nodes, labelled and tainted with a pool name, and
// its jobs select and tolerate only that pool, so no other pod lands there.
package gang_test

import (
	"testing"

	"github.com/trainstep/trainstep/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }
