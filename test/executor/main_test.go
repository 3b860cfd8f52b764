// Package executor_test proves `trainstep run` on the real test cluster:
// launch, restarts, success and failure policies, cleanup, signals,
// re-attach, permissions and log streaming, driven by the cluster's KWOK
// Stage annotations.
package executor_test

import (
	"testing"

	"github.com/trainstep/trainstep/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }
