package local

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/trainstep/trainstep/pkg/frameworks/framework"
	"github.com/trainstep/trainstep/pkg/policy"
)

// Loopback is the address every replica listens on and is reached at.
const Loopback = "127.0.0.1"

// peerBook knows every name a replica is reached by on a cluster and the
// local port that stands in for it. On a cluster each replica has its own
// address and they share the framework's port; locally they share one
// address, so each needs its own port.
type peerBook struct {
	ports map[policy.ReplicaID]int
	// hosts maps every DNS form of a replica's name to the replica.
	hosts map[string]policy.ReplicaID
}

// newPeerBook gives each replica in ports every host name the frameworks
// use for it: the bare Service name and its namespaced forms
// ("<job>-<type>-<i>.<ns>.svc", Training Operator style), and the MPI
// Operator's pod-in-job-Service forms ("<pod>.<job>.<ns>.svc").
func newPeerBook(jobName, namespace string, ports map[policy.ReplicaID]int) *peerBook {
	b := &peerBook{ports: ports, hosts: map[string]policy.ReplicaID{}}
	for id := range ports {
		name := framework.ReplicaName(jobName, id.Type, id.Index)
		for _, domain := range []string{"", "." + namespace, "." + jobName, "." + jobName + "." + namespace} {
			for _, suffix := range []string{"", ".svc", ".svc.cluster.local"} {
				if domain == "" && suffix != "" {
					continue
				}
				b.hosts[name+domain+suffix] = id
			}
		}
	}
	return b
}

// replicaOf returns the replica a host name stands for.
func (b *peerBook) replicaOf(host string) (policy.ReplicaID, bool) {
	id, ok := b.hosts[strings.TrimSuffix(strings.ToLower(host), ".")]
	return id, ok
}

// rewriteAddress turns "host:port" or "host" of a replica into its local
// address; anything else is returned unchanged with false.
func (b *peerBook) rewriteAddress(addr string) (string, bool) {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if id, ok := b.replicaOf(host); ok {
			return net.JoinHostPort(Loopback, strconv.Itoa(b.ports[id])), true
		}
		return addr, false
	}
	if _, ok := b.replicaOf(addr); ok {
		return Loopback, true
	}
	return addr, false
}

// rewriteValue rewrites an env value that is an address or a comma
// separated list of addresses (XGBoost's WORKER_ADDRS).
func (b *peerBook) rewriteValue(value string) string {
	parts := strings.Split(value, ",")
	changed := false
	for i, part := range parts {
		if local, ok := b.rewriteAddress(strings.TrimSpace(part)); ok {
			parts[i], changed = local, true
		}
	}
	if !changed {
		return value
	}
	return strings.Join(parts, ",")
}

// Address implements framework.Peers.
func (b *peerBook) Address(addr string) (string, bool) { return b.rewriteAddress(addr) }

// Port implements framework.Peers.
func (b *peerBook) Port(r framework.ReplicaRef) int {
	return b.ports[policy.ReplicaID{Type: r.Type, Index: r.Index}]
}

// PortOfHosts implements framework.Peers: the local port of the host held
// by hosts (the first host of a list), and how many distinct replicas the
// list names.
func (b *peerBook) PortOfHosts(hosts string) (port int, replicas int, ok bool) {
	seen := map[policy.ReplicaID]bool{}
	for i, part := range strings.Split(hosts, ",") {
		host := strings.TrimSpace(part)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		id, found := b.replicaOf(host)
		if !found {
			continue
		}
		seen[id] = true
		if i == 0 {
			port, ok = b.ports[id], true
		}
	}
	return port, len(seen), ok
}

// freePorts finds n distinct free TCP ports on the loopback address. The
// listeners stay open until all n are found, so no port is handed out
// twice; another program may still take one before the replica binds it.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", net.JoinHostPort(Loopback, "0"))
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
