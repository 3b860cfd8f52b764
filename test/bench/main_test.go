package bench

import (
	"os"
	"testing"

	"github.com/trainstep/trainstep/test/cluster"
)

// benchEnv turns the cluster measurements on; `make bench` sets it. Without it
// only the package's unit tests run and no cluster is started, so `go test
// ./test/...` stays quick.
const benchEnv = "TRAINSTEP_BENCH"

func TestMain(m *testing.M) {
	if os.Getenv(benchEnv) == "" {
		os.Exit(m.Run())
	}
	cluster.Main(m)
}
