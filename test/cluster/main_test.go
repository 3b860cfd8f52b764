package cluster_test

import (
	"testing"

	"github.com/trainstep/trainstep/test/cluster"
)

func TestMain(m *testing.M) {
	cluster.Main(m)
}
