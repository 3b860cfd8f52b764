package pytorch

import (
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
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
	if host, ok := localPorts[name]; ok {
		return framework.LocalPort(name, host, lookup, peers)
	}
	return "", false, ""
}

// LocalSetup implements framework.Local: PyTorch's pods mount nothing of
// the job.
func (Framework) LocalSetup(*v1alpha1.TrainJob, string) (framework.LocalSetup, error) {
	return framework.LocalSetup{}, nil
}
