package local

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/frameworks/tensorflow"
	"github.com/trainstep/trainstep/pkg/policy"
)

var (
	ps0     = policy.ReplicaID{Type: v1alpha1.ReplicaTypePS, Index: 0}
	worker0 = policy.ReplicaID{Type: v1alpha1.ReplicaTypeWorker, Index: 0}
	worker1 = policy.ReplicaID{Type: v1alpha1.ReplicaTypeWorker, Index: 1}
	master0 = policy.ReplicaID{Type: v1alpha1.ReplicaTypeMaster, Index: 0}
)

func testPeers() *peerBook {
	return newPeerBook("mnist", "team-a", map[policy.ReplicaID]int{ps0: 40001, worker0: 40002, worker1: 40003, master0: 40004})
}

func TestRewriteValuePointsReplicaNamesAtLoopback(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"bare Service name (PyTorch MASTER_ADDR)", "mnist-master-0", "127.0.0.1"},
		{"Training Operator Service address", "mnist-ps-0.team-a.svc:2222", "127.0.0.1:40001"},
		{"fully qualified", "mnist-worker-1.team-a.svc.cluster.local:2222", "127.0.0.1:40003"},
		{"MPI Operator pod-in-job-Service name", "mnist-worker-0.mnist.team-a.svc", "127.0.0.1"},
		{"per-job layout's name (TF_CONFIG)", "mnist-worker-1.mnist:2222", "127.0.0.1:40003"},
		{"per-job layout's list (XGBoost WORKER_ADDRS)", "mnist-worker-0.mnist,mnist-worker-1.mnist", "127.0.0.1,127.0.0.1"},
		{"host:port with a port other than the framework's", "mnist-worker-0:29400", "127.0.0.1:40002"},
		{"list of workers (XGBoost WORKER_ADDRS)", "mnist-worker-0,mnist-worker-1", "127.0.0.1,127.0.0.1"},
		{"upper case is DNS's case", "MNIST-PS-0.team-a.svc:2222", "127.0.0.1:40001"},
		{"a name that is not a replica stays", "mnist-worker-7:2222", "mnist-worker-7:2222"},
		{"another namespace stays", "mnist-ps-0.team-b.svc:2222", "mnist-ps-0.team-b.svc:2222"},
		{"plain value", "1", "1"},
		{"URL stays", "http://mnist-ps-0:2222/x", "http://mnist-ps-0:2222/x"},
	}
	peers := testPeers()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := peers.rewriteValue(tc.in); got != tc.want {
				t.Errorf("rewriteValue(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRewriteTFConfigKeepsTaskAndRewritesEveryAddress(t *testing.T) {
	in := `{"cluster":{"ps":["mnist-ps-0.team-a.svc:2222"],"worker":["mnist-worker-0.team-a.svc:2222","mnist-worker-1.team-a.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}`
	out, handled, warning := tensorflow.Framework{}.LocalValue(tensorflow.EnvTFConfig, in, framework.ReplicaRef{}, nil, testPeers())
	if !handled || warning != "" {
		t.Fatalf("handled %v, warning %q", handled, warning)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("rewritten TF_CONFIG is not JSON: %v\n%s", err, out)
	}
	want := map[string]any{
		"cluster": map[string]any{
			"ps":     []any{"127.0.0.1:40001"},
			"worker": []any{"127.0.0.1:40002", "127.0.0.1:40003"},
		},
		"task":        map[string]any{"type": "worker", "index": 1.0},
		"environment": "cloud",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TF_CONFIG (-want +got):\n%s", diff)
	}
}

func TestRewriteTFConfigThatIsNotJSONIsAnError(t *testing.T) {
	in := "cluster=mnist-ps-0:2222"
	out, _, warning := tensorflow.Framework{}.LocalValue(tensorflow.EnvTFConfig, in, framework.ReplicaRef{}, nil, testPeers())
	if warning == "" {
		t.Fatal("want a warning for a TF_CONFIG that is not JSON")
	}
	if out != in {
		t.Errorf("value changed to %q; it should stay as it was", out)
	}
}

func TestPortForIsTheFirstReplicaOfTheList(t *testing.T) {
	cases := []struct {
		hosts        string
		wantPort     int
		wantReplicas int
		wantOK       bool
	}{
		{"mnist-master-0", 40004, 1, true},
		{"mnist-worker-1,mnist-worker-0", 40003, 2, true},
		{"mnist-worker-0:29400", 40002, 1, true},
		{"elsewhere", 0, 0, false},
	}
	for _, tc := range cases {
		port, replicas, ok := testPeers().PortOfHosts(tc.hosts)
		if port != tc.wantPort || replicas != tc.wantReplicas || ok != tc.wantOK {
			t.Errorf("PortOfHosts(%q) = %d, %d, %v; want %d, %d, %v", tc.hosts, port, replicas, ok, tc.wantPort, tc.wantReplicas, tc.wantOK)
		}
	}
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := freePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: %d is invalid or repeated", ports, p)
		}
		seen[p] = true
	}
}
