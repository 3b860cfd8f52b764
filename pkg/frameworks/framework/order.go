package framework

import (
	"sort"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// replicaTypeRank orders replica types the way people read a job: the
// deciding replica first, then servers, workers and side replicas.
var replicaTypeRank = map[v1alpha1.ReplicaType]int{
	v1alpha1.ReplicaTypeChief: 0, v1alpha1.ReplicaTypeMaster: 1, v1alpha1.ReplicaTypeLauncher: 2,
	v1alpha1.ReplicaTypePS: 3, v1alpha1.ReplicaTypeWorker: 4, v1alpha1.ReplicaTypeEvaluator: 5,
}

// SortedReplicaTypes returns the job's replica types in a stable order, so
// that rendering, logs and outputs never depend on map iteration.
func SortedReplicaTypes(job *v1alpha1.TrainJob) []v1alpha1.ReplicaType {
	types := make([]v1alpha1.ReplicaType, 0, len(job.Spec.ReplicaSpecs))
	for t := range job.Spec.ReplicaSpecs {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		ri, iok := replicaTypeRank[types[i]]
		rj, jok := replicaTypeRank[types[j]]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok
		}
		return types[i] < types[j]
	})
	return types
}
