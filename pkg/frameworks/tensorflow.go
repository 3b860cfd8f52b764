package frameworks

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// EnvTFConfig is the variable TensorFlow reads its cluster and task from.
const EnvTFConfig = "TF_CONFIG"

// tensorflow follows the Training Operator v1.9's TFJob: a TF_CONFIG on the
// main container of every replica of a distributed job.
type tensorflow struct {
	servicePerReplica
	noExtraObjects
}

// tfConfig is TF_CONFIG. Its field order and the sorted keys of Cluster
// (a map, which encoding/json sorts) give the Training Operator's bytes.
type tfConfig struct {
	Cluster     map[string][]string `json:"cluster"`
	Task        tfTask              `json:"task"`
	Environment string              `json:"environment"`
}

type tfTask struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

func (tensorflow) ConfigurePod(job *v1alpha1.TrainJob, at Placement, replica ReplicaRef, spec *corev1.PodSpec) error {
	// A job of one replica trains locally: TensorFlow must not wait for peers.
	if TotalReplicas(job) == 1 {
		return nil
	}
	main := MainContainer(job.Spec.Framework, spec)
	if main == nil {
		return nil
	}
	value, err := TFConfig(job, at, replica)
	if err != nil {
		return err
	}
	main.Env = append(main.Env, envVar(EnvTFConfig, value))
	return nil
}

// TFConfig returns the TF_CONFIG JSON of one replica: every replica of every
// type (evaluator included) as "<job>-<type>-<i>.<ns>.svc:<port>", the
// replica's own type and index, and environment "cloud". (The operator's
// CUSTOM_CLUSTER_DOMAIN suffix is not offered: "<svc>.<ns>.svc" resolves
// in every cluster through the pods' DNS search path.)
func TFConfig(job *v1alpha1.TrainJob, at Placement, replica ReplicaRef) (string, error) {
	cluster := make(map[string][]string, len(job.Spec.ReplicaSpecs))
	for rt := range job.Spec.ReplicaSpecs {
		n := Replicas(job, rt)
		port := Port(job, rt)
		addresses := make([]string, 0, n)
		for i := 0; i < n; i++ {
			addresses = append(addresses, fmt.Sprintf("%s.%s.svc:%d", v1alpha1.ReplicaName(at.JobName, rt, i), at.Namespace, port))
		}
		cluster[strings.ToLower(string(rt))] = addresses
	}
	config := tfConfig{
		Cluster:     cluster,
		Task:        tfTask{Type: strings.ToLower(string(replica.Type)), Index: replica.Index},
		Environment: "cloud",
	}
	data, err := json.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("encoding %s: %w", EnvTFConfig, err)
	}
	return string(data), nil
}

// SuccessRule follows the TFJob controller's UpdateJobStatus: a Chief (or
// Master) decides when the job has one; otherwise Worker 0 decides under
// the Default policy and every worker must succeed under AllWorkers.
func (tensorflow) SuccessRule(job *v1alpha1.TrainJob) SuccessRule {
	for _, rt := range []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeChief, v1alpha1.ReplicaTypeMaster} {
		if rule, ok := leaderIfPresent(job, rt); ok {
			return rule
		}
	}
	if Replicas(job, v1alpha1.ReplicaTypeWorker) == 0 {
		return allOfEveryType(job)
	}
	if job.Spec.SuccessPolicy == v1alpha1.SuccessPolicyAllWorkers {
		return SuccessRule{AllOf: []v1alpha1.ReplicaType{v1alpha1.ReplicaTypeWorker}}
	}
	rule, _ := leaderIfPresent(job, v1alpha1.ReplicaTypeWorker)
	return rule
}
