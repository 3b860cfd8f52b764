package pytorch

import (
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// localPorts pairs each variable that holds a port with the variable that
// holds its host: locally the port is that replica's own.
var localPorts = map[string]string{
	EnvMasterPort:    EnvMasterAddr,
	EnvPETMasterPort: EnvPETMasterAddr,
}

// LocalValue implements framework.Local: the master's ports become its
// local port; the addresses (MASTER_ADDR, PET_RDZV_ENDPOINT) are the local
// backend's to rewrite.
func (Framework) LocalValue(name, _ string, _ framework.ReplicaRef, lookup func(string) (string, bool), peers framework.Peers) (string, bool, string) {
	return framework.LocalPorts(localPorts, name, lookup, peers)
}
