package framework

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// Peers is how replicas reach each other on one machine
// (pkg/backend/local): every replica listens on 127.0.0.1, at a port of
// its own instead of the framework's shared one.
type Peers interface {
	// Address turns "host:port" or "host" naming a replica (in any of its
	// DNS forms) into its local address, and reports whether it named one.
	Address(addr string) (string, bool)
	// Port is the local port of replica r.
	Port(r ReplicaRef) int
	// PortOfHosts returns the local port of the first replica a host value
	// names (a host, "host:port", or a comma separated list of them), and
	// how many distinct replicas the value names.
	PortOfHosts(hosts string) (port, replicas int, ok bool)
}

// Local is implemented by a framework whose replicas need more, to run as
// processes on one machine, than every replica address in their variables
// pointed at 127.0.0.1 and the replica's own port (which the local backend
// does for every variable a framework leaves to it).
type Local interface {
	// LocalValue rewrites variable name of replica self, value being its
	// value with references expanded, for a process on this machine.
	// lookup gives the values of the container's variables before any
	// rewrite. handled false leaves the variable to the local backend;
	// warning, when not empty, says what does not work the same locally.
	LocalValue(name, value string, self ReplicaRef, lookup func(string) (string, bool), peers Peers) (rewritten string, handled bool, warning string)
	// LocalSetup writes into dir what the job's pods would mount from the
	// objects the framework adds, and says where.
	LocalSetup(job *v1alpha1.TrainJob, dir string) (LocalSetup, error)
}

// LocalSetup is what a job's processes find on one machine in place of
// what its pods mount.
type LocalSetup struct {
	// Mounts maps a directory of the pods (MPI's /etc/mpi) to the local
	// directory that stands in for it; paths in variables, commands and
	// arguments are rewritten to it.
	Mounts map[string]string
	// Env is added to every process's variables.
	Env []corev1.EnvVar
}

// LocalPort is the local value of a variable that holds the port of the
// host(s) variable hostVar holds: the port of that replica on this machine.
// handled is false when hostVar names no replica; a list of several
// replicas (XGBoost's WORKER_ADDRS) has one port locally, the first's.
func LocalPort(name, hostVar string, lookup func(string) (string, bool), peers Peers) (value string, handled bool, warning string) {
	hosts, _ := lookup(hostVar)
	port, replicas, ok := peers.PortOfHosts(hosts)
	if !ok {
		return "", false, ""
	}
	if replicas > 1 {
		warning = fmt.Sprintf("%s names %d replicas but %s holds one port: locally each replica has its own port, so only the first is reachable through it",
			hostVar, replicas, name)
	}
	return strconv.Itoa(port), true, warning
}

// NothingMounted is embedded by a framework whose pods mount nothing of
// the job: on one machine there is nothing to write for them.
type NothingMounted struct{}

// LocalSetup implements Local.
func (NothingMounted) LocalSetup(*v1alpha1.TrainJob, string) (LocalSetup, error) {
	return LocalSetup{}, nil
}

// LocalPorts is the local value of variable name when ports pairs it with
// the variable holding its host(s) (LocalPort), and not handled otherwise.
func LocalPorts(ports map[string]string, name string, lookup func(string) (string, bool), peers Peers) (string, bool, string) {
	if host, ok := ports[name]; ok {
		return LocalPort(name, host, lookup, peers)
	}
	return "", false, ""
}
