package paddle

import (
	"net"
	"strconv"

	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// LocalValue implements framework.Local: the replica hosting the
// rendezvous names itself by its pod IP, which on one machine is
// 127.0.0.1, at the framework's port; locally it listens on a port of its
// own, which PADDLE_MASTER then names. The other replicas name the host by
// its Service, which the local backend points at that port.
func (Framework) LocalValue(name, value string, self framework.ReplicaRef, _ func(string) (string, bool), peers framework.Peers) (string, bool, string) {
	if name != EnvMaster {
		return "", false, ""
	}
	if _, named := peers.Address(value); named {
		return "", false, ""
	}
	host, _, err := net.SplitHostPort(value)
	if err != nil {
		return "", false, ""
	}
	return net.JoinHostPort(host, strconv.Itoa(peers.Port(self))), true, ""
}
