package framework

import (
	"strings"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// Conventions are a framework's replica types and where its environment
// goes: the names and numbers of its operator's *_types.go.
type Conventions struct {
	// ReplicaTypes lists the types the framework accepts, in the order its
	// documentation lists them.
	ReplicaTypes []ReplicaType
	// Container is the name of the container the framework's env and port
	// go on; "" for the first container (MPI).
	Container string
	// PortName and Port are the named port of that container and its
	// default; "" and 0 when the framework has none (MPI talks over SSH).
	PortName string
	Port     int32
}

// ReplicaType is what a framework says about one of its replica types.
type ReplicaType struct {
	Type v1alpha1.ReplicaType
	// RestartPolicy is the type's default restart policy.
	RestartPolicy v1alpha1.RestartPolicy
	// OutsideCollective says a failure of the type restarts it alone even
	// in a job that restarts as a whole: it takes no part in the collective
	// (TensorFlow's evaluator, which reads checkpoints; MPI's launcher,
	// retried in place while mpirun cannot reach workers still starting).
	OutsideCollective bool
	// Drives says the type runs the job's entry point, which reaches the
	// others itself (MPI's launcher runs mpirun): its failures right after
	// a peer ended are that peer's doing, and replicas that are Slots
	// follow its phase.
	Drives bool
	// ServesPeers says the type's process only serves the driver (an MPI
	// worker runs sshd for mpirun): it does not fail when a peer goes.
	ServesPeers bool
	// Slot says that on one machine (pkg/backend/local) a replica of the
	// type runs no process of its own: it is a slot of the driver's
	// hostfile (MPI's workers).
	Slot bool
}

// Type returns the convention of rt, and false when the framework has no
// such type.
func (c *Conventions) Type(rt v1alpha1.ReplicaType) (ReplicaType, bool) {
	for _, t := range c.ReplicaTypes {
		if t.Type == rt {
			return t, true
		}
	}
	return ReplicaType{}, false
}

// Types lists the framework's replica types in documentation order.
func (c *Conventions) Types() []v1alpha1.ReplicaType {
	types := make([]v1alpha1.ReplicaType, len(c.ReplicaTypes))
	for i, t := range c.ReplicaTypes {
		types[i] = t.Type
	}
	return types
}

// Canonical returns the framework's spelling of a replica type written in
// any case ("worker" → Worker, "ps" → PS), and whether the framework has it.
func (c *Conventions) Canonical(s string) (v1alpha1.ReplicaType, bool) {
	for _, t := range c.ReplicaTypes {
		if strings.EqualFold(s, string(t.Type)) {
			return t.Type, true
		}
	}
	return v1alpha1.ReplicaType(s), false
}
