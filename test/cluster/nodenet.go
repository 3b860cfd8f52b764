package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// nodeNetworkPrefix is where the real node's point-to-point links are carved from: a /30 per
// cluster, the first address on this host's side of the veth pair (kube-apiserver binds it),
// the second inside the node's network namespace (the kubelet's node IP). The kubelet
// refuses a loopback node IP, hence a link of the cluster's own.
var nodeNetworkPrefix = net.IPv4(10, 230, 0, 0)

// nodeNetwork is the network namespace of a real node and the veth pair into it. Nothing
// outside it is routed: the namespace has no default route and this host does not forward,
// so pods reach the node, each other and the API server's address, and nothing beyond.
type nodeNetwork struct {
	// Namespace is the name under /run/netns (ip netns).
	Namespace string `json:"namespace"`
	// HostLink is this host's end of the veth pair; the node's end is eth0 in Namespace.
	HostLink string `json:"hostLink"`
	// HostIP is HostLink's address, where kube-apiserver listens.
	HostIP string `json:"hostIP"`
	// NodeIP is eth0's address in Namespace, the node's InternalIP.
	NodeIP string `json:"nodeIP"`
}

// namespacePath is the namespace's file, what nsenter --net= takes.
func (n nodeNetwork) namespacePath() string { return "/run/netns/" + n.Namespace }

// createNodeNetwork makes a network namespace and a veth pair with a free /30 of
// nodeNetworkPrefix. On error nothing is left behind.
func createNodeNetwork() (_ nodeNetwork, err error) {
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nodeNetwork{}, fmt.Errorf("choosing a network namespace name: %w", err)
	}
	id := hex.EncodeToString(suffix)
	hostIP, nodeIP, err := freeLinkAddresses()
	if err != nil {
		return nodeNetwork{}, err
	}
	n := nodeNetwork{Namespace: "trainstep-" + id, HostLink: "ts" + id, HostIP: hostIP.String(), NodeIP: nodeIP.String()}
	if err := run("ip", "netns", "add", n.Namespace); err != nil {
		return nodeNetwork{}, fmt.Errorf("creating network namespace %s: %w", n.Namespace, err)
	}
	defer func() {
		if err != nil {
			_ = n.delete()
		}
	}()
	steps := [][]string{
		{"ip", "link", "add", n.HostLink, "type", "veth", "peer", "name", "eth0", "netns", n.Namespace},
		{"ip", "addr", "add", n.HostIP + "/30", "dev", n.HostLink},
		{"ip", "link", "set", n.HostLink, "up"},
		{"ip", "-n", n.Namespace, "addr", "add", n.NodeIP + "/30", "dev", "eth0"},
		{"ip", "-n", n.Namespace, "link", "set", "eth0", "up"},
		{"ip", "-n", n.Namespace, "link", "set", "lo", "up"},
	}
	for _, step := range steps {
		if err := run(step[0], step[1:]...); err != nil {
			return nodeNetwork{}, fmt.Errorf("setting up the node's network: %w", err)
		}
	}
	return n, nil
}

// connectNodes routes the real nodes' pod networks. This host reaches each node's pods
// through that node's link, so pods reach the API server, and it them, by their own
// addresses. With more than one node, each node's namespace routes the other nodes' pod
// networks and node IPs, and the API server's address, to this host, which forwards between
// the nodes' links: forwarding is switched on for those interfaces alone
// (net.ipv4.conf.<link>.forwarding; it goes with the link), not host-wide, and the nodes
// route nothing else, so nothing of theirs is forwarded anywhere but to another node.
func connectNodes(nodes []*realNode) error {
	for i, n := range nodes {
		if err := run("ip", "route", "replace", n.PodCIDR, "via", n.Network.NodeIP, "dev", n.Network.HostLink); err != nil {
			return fmt.Errorf("routing the pod network of %s: %w", n.Name, err)
		}
		if len(nodes) > 1 {
			forwarding := "/proc/sys/net/ipv4/conf/" + n.Network.HostLink + "/forwarding"
			if err := os.WriteFile(forwarding, []byte("1"), 0o644); err != nil {
				return fmt.Errorf("letting %s's link forward to the other nodes: %w", n.Name, err)
			}
		}
		if err := routeNode(nodes, i); err != nil {
			return err
		}
	}
	return nil
}

// routeNode sets the routes of node i's namespace beyond its link's own /30: Service IPs
// on the link, and through this host the other nodes' pod networks and node IPs and the API
// server's address (this host's end of the first node's link). A node's link going down
// takes them away; RestartRealNode sets them again.
func routeNode(nodes []*realNode, i int) error {
	for _, route := range nodeRoutes(nodes, i) {
		if err := run("ip", append([]string{"-n", nodes[i].Network.Namespace, "route", "replace"}, route...)...); err != nil {
			return fmt.Errorf("routing %s's network: %w", nodes[i].Name, err)
		}
	}
	return nil
}

// nodeRoutes are routeNode's routes, as `ip route replace` takes them.
func nodeRoutes(nodes []*realNode, i int) [][]string {
	n := nodes[i]
	// Service IPs are rewritten by kube-proxy before routing for pods; this on-link route
	// lets processes of the node itself connect to them too (OUTPUT is routed first). An
	// address kube-proxy does not rewrite goes unanswered on the link.
	routes := [][]string{{serviceClusterIPRange, "dev", "eth0"}}
	for j, peer := range nodes {
		if j == i {
			continue
		}
		routes = append(routes,
			[]string{peer.PodCIDR, "via", n.Network.HostIP, "dev", "eth0"},
			[]string{peer.Network.NodeIP + "/32", "via", n.Network.HostIP, "dev", "eth0"})
	}
	if i > 0 {
		routes = append(routes, []string{nodes[0].Network.HostIP + "/32", "via", n.Network.HostIP, "dev", "eth0"})
	}
	return routes
}

// delete removes the namespace; the veth pair goes with it. A namespace already gone is not
// an error.
func (n nodeNetwork) delete() error {
	if n.Namespace == "" {
		return nil
	}
	if _, err := os.Stat(n.namespacePath()); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := run("ip", "netns", "delete", n.Namespace); err != nil {
		return fmt.Errorf("deleting network namespace %s: %w", n.Namespace, err)
	}
	return nil
}

// freeLinkAddresses picks a /30 of nodeNetworkPrefix's /16 that no interface of this host
// uses and returns its two usable addresses.
func freeLinkAddresses() (host, node net.IP, err error) {
	used := map[string]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, nil, fmt.Errorf("listing this host's addresses: %w", err)
	}
	for _, a := range addrs {
		if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.To4() != nil {
			used[ipnet.IP.Mask(net.CIDRMask(30, 32)).String()] = true
		}
	}
	for range 64 {
		var r [2]byte
		if _, err := rand.Read(r[:]); err != nil {
			return nil, nil, fmt.Errorf("choosing the node's addresses: %w", err)
		}
		base := binary.BigEndian.Uint32(nodeNetworkPrefix.To4()) | uint32(binary.BigEndian.Uint16(r[:])&^3)
		network := make(net.IP, 4)
		binary.BigEndian.PutUint32(network, base)
		if used[network.String()] {
			continue
		}
		host, node = make(net.IP, 4), make(net.IP, 4)
		binary.BigEndian.PutUint32(host, base+1)
		binary.BigEndian.PutUint32(node, base+2)
		return host, node, nil
	}
	return nil, nil, errors.New("choosing the node's addresses: no free /30 found in 10.230.0.0/16")
}

// run runs a command and returns its output in the error when it fails.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
