package cluster

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRealNodesAreNamedAndNumbered(t *testing.T) {
	var got [][]string
	for i := range 3 {
		s := realNodeState("/tmp/cluster", i, nodeNetwork{Namespace: "trainstep-0" + strconv.Itoa(i)})
		got = append(got, []string{s.Name, s.PodCIDR, s.Dir, s.ContainerdSocket, s.CNINetwork, s.component("kubelet")})
	}
	want := [][]string{
		{"real-node", "10.245.0.0/24", "/tmp/cluster/node", "/tmp/cluster/node/containerd.sock", "trainstep-00", "kubelet"},
		{"real-node-2", "10.245.1.0/24", "/tmp/cluster/node-2", "/tmp/cluster/node-2/containerd.sock", "trainstep-01", "kubelet-2"},
		{"real-node-3", "10.245.2.0/24", "/tmp/cluster/node-3", "/tmp/cluster/node-3/containerd.sock", "trainstep-02", "kubelet-3"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("real nodes (-want +got):\n%s", diff)
	}
}

func TestNodeRoutes(t *testing.T) {
	node := func(i int, hostIP, nodeIP string) *realNode {
		return &realNode{nodeState: nodeState{Name: realNodeName(i), PodCIDR: realNodePodCIDR(i), Network: nodeNetwork{HostIP: hostIP, NodeIP: nodeIP}}}
	}
	one := []*realNode{node(0, "10.230.1.1", "10.230.1.2")}
	two := append(one, node(1, "10.230.7.5", "10.230.7.6"))
	tests := []struct {
		name  string
		nodes []*realNode
		i     int
		want  [][]string
	}{
		{"a single node routes Service IPs on its link only", one, 0, [][]string{
			{"10.96.0.0/16", "dev", "eth0"},
		}},
		{"the first of two reaches the other's pods and node IP through this host", two, 0, [][]string{
			{"10.96.0.0/16", "dev", "eth0"},
			{"10.245.1.0/24", "via", "10.230.1.1", "dev", "eth0"},
			{"10.230.7.6/32", "via", "10.230.1.1", "dev", "eth0"},
		}},
		{"the second also reaches the API server on the first's link", two, 1, [][]string{
			{"10.96.0.0/16", "dev", "eth0"},
			{"10.245.0.0/24", "via", "10.230.7.5", "dev", "eth0"},
			{"10.230.1.2/32", "via", "10.230.7.5", "dev", "eth0"},
			{"10.230.1.1/32", "via", "10.230.7.5", "dev", "eth0"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, nodeRoutes(tc.nodes, tc.i)); diff != "" {
				t.Errorf("routes of node %d (-want +got):\n%s", tc.i, diff)
			}
		})
	}
}

func TestNodeLifecycleIsShortenedOnlyWhenAsked(t *testing.T) {
	c := &Cluster{}
	if flags, lease := c.nodeLifecycleFlags(), c.nodeLeaseSeconds(); flags != nil || lease != 0 {
		t.Errorf("without a grace period: flags %v, lease %ds; want Kubernetes' defaults", flags, lease)
	}
	c.nodeGrace = 20 * time.Second
	want := []string{"--node-monitor-grace-period=20s", "--node-monitor-period=2s"}
	if diff := cmp.Diff(want, c.nodeLifecycleFlags()); diff != "" {
		t.Errorf("kube-controller-manager's flags (-want +got):\n%s", diff)
	}
	if lease := c.nodeLeaseSeconds(); lease != 20 {
		t.Errorf("the kubelets' Lease lasts %ds, want 20s (renewed every 5s, four times in the grace period)", lease)
	}
}
