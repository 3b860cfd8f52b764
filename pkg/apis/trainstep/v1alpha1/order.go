package v1alpha1

import "sort"

// replicaTypeRank orders replica types the way people read a job: the
// deciding replica first, then servers, workers and side replicas.
var replicaTypeRank = map[ReplicaType]int{
	ReplicaTypeChief: 0, ReplicaTypeMaster: 1, ReplicaTypeLauncher: 2,
	ReplicaTypePS: 3, ReplicaTypeWorker: 4, ReplicaTypeEvaluator: 5,
}

// SortedReplicaTypes returns the job's replica types in a stable order, so
// that rendering, logs and outputs never depend on map iteration.
func SortedReplicaTypes(job *TrainJob) []ReplicaType {
	types := make([]ReplicaType, 0, len(job.Spec.ReplicaSpecs))
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
