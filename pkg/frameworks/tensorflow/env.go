package tensorflow

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// EnvTFConfig is the variable TensorFlow reads its cluster and task from.
const EnvTFConfig = "TF_CONFIG"

// EnvTFCluster holds TF_CONFIG's cluster, taken from the job's cluster
// ConfigMap (key TFClusterKey); TF_CONFIG refers to it as $(TRAINSTEP_TF_CLUSTER).
const EnvTFCluster = "TRAINSTEP_TF_CLUSTER"

// TFClusterKey is the key of the cluster in the job's cluster ConfigMap.
const TFClusterKey = "cluster"

// ClusterConfigMapSuffix names the ConfigMap "<job>-tf-cluster" that holds
// a distributed job's cluster, which every replica's TF_CONFIG refers to.
const ClusterConfigMapSuffix = "-tf-cluster"

// ClusterConfigMapName is the name of a distributed job's cluster ConfigMap.
func ClusterConfigMapName(jobName string) string { return jobName + ClusterConfigMapSuffix }

// Prepare implements framework.Framework.
func (Framework) Prepare(job *v1alpha1.TrainJob, at framework.Placement) (framework.PodConfigurer, error) {
	// A job of one replica trains locally: TensorFlow must not wait for peers.
	if framework.Total(job) == 1 {
		return tfPods{jobName: at.JobName}, nil
	}
	cluster, err := newTFCluster(job, at)
	if err != nil {
		return nil, err
	}
	names := fmt.Sprintf("the job name %q or the namespace %q", at.JobName, at.Namespace)
	if err := framework.CheckEnvVarSize(framework.Total(job), EnvTFConfig, cluster.longest(job), names); err != nil {
		return nil, err
	}
	return tfPods{jobName: at.JobName, cluster: &cluster}, nil
}

// tfPods sets TF_CONFIG on the main container of each pod of a job.
type tfPods struct {
	jobName string
	// cluster is nil for a job that trains locally.
	cluster *tfCluster
}

func (p tfPods) ConfigurePod(replica framework.ReplicaRef, spec *corev1.PodSpec) error {
	if p.cluster == nil {
		return nil
	}
	main := conventions.MainContainer(spec)
	if main == nil {
		return nil
	}
	main.Env = append(main.Env, corev1.EnvVar{Name: EnvTFCluster, ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ClusterConfigMapName(p.jobName)},
			Key:                  TFClusterKey,
		},
	}})
	main.Env = append(main.Env, framework.EnvVar(EnvTFConfig, tfConfig("$("+EnvTFCluster+")", replica)))
	return nil
}

// ConfigMaps returns a distributed job's cluster ConfigMap
// "<job>-tf-cluster". It is immutable: the kubelet need not watch it.
func (Framework) ConfigMaps(job *v1alpha1.TrainJob, at framework.Placement) ([]*corev1.ConfigMap, error) {
	if framework.Total(job) == 1 {
		return nil, nil
	}
	cluster, err := tfClusterJSON(job, at)
	if err != nil {
		return nil, err
	}
	immutable := true
	return []*corev1.ConfigMap{{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterConfigMapName(at.JobName)},
		Immutable:  &immutable,
		Data:       map[string]string{TFClusterKey: cluster},
	}}, nil
}

// ConfigMapNames implements framework.SharedObjects.
func (Framework) ConfigMapNames(job *v1alpha1.TrainJob, jobName string) []string {
	if framework.Total(job) == 1 {
		return nil
	}
	return []string{ClusterConfigMapName(jobName)}
}

// Secrets implements framework.SharedObjects: TensorFlow has none.
func (Framework) Secrets(*v1alpha1.TrainJob, framework.Placement, framework.SSHKeyPair) ([]*corev1.Secret, error) {
	return nil, nil
}

// Labels implements framework.SharedObjects: the Training Operator adds none.
func (Framework) Labels(string) map[string]string { return nil }

// TFConfig returns the TF_CONFIG JSON of one replica, as its process sees
// it (the cluster expanded): every replica of every type (evaluator
// included) as "<job>-<type>-<i>.<ns>.svc:<port>" under the per-replica
// layout or "<job>-<type>-<i>.<job>:<port>" under the per-job layout, the
// replica's own type and index, and environment "cloud". (The operator's
// CUSTOM_CLUSTER_DOMAIN suffix is not offered: both forms resolve in every
// cluster through the pods' DNS search path.)
func TFConfig(job *v1alpha1.TrainJob, at framework.Placement, replica framework.ReplicaRef) (string, error) {
	cluster, err := newTFCluster(job, at)
	if err != nil {
		return "", err
	}
	return cluster.config(replica), nil
}

// tfCluster is the part of TF_CONFIG every replica shares, encoded once
// with encoding/json (sorted keys, its escaping) as the Training Operator
// encodes the whole document. At 2048 workers the cluster is about 90 KB:
// building it per pod made rendering a job quadratic in its size.
type tfCluster struct {
	// cluster is TF_CONFIG's "cluster" value: `{"ps":[…],"worker":[…]}`.
	cluster string
}

func newTFCluster(job *v1alpha1.TrainJob, at framework.Placement) (tfCluster, error) {
	cluster, err := tfClusterJSON(job, at)
	return tfCluster{cluster: cluster}, err
}

// tfClusterJSON encodes TF_CONFIG's cluster of job.
func tfClusterJSON(job *v1alpha1.TrainJob, at framework.Placement) (string, error) {
	cluster := make(map[string][]string, len(job.Spec.ReplicaSpecs))
	// The Training Operator's "<pod>.<ns>.svc" under its own layout;
	// "<pod>.<job>" under the job's Service.
	domain := "." + at.Namespace + ".svc"
	if job.Spec.ServiceLayoutOrDefault() == v1alpha1.ServiceLayoutPerJob {
		domain = ""
	}
	for rt := range job.Spec.ReplicaSpecs {
		n := framework.Count(job, rt)
		suffix := domain + ":" + strconv.Itoa(int(conventions.PortOf(job, rt)))
		addresses := make([]string, 0, n)
		for i := 0; i < n; i++ {
			addresses = append(addresses, framework.PeerHost(job, at, rt, i)+suffix)
		}
		cluster[strings.ToLower(string(rt))] = addresses
	}
	// The cluster encodes alone as it does inside the whole document (a
	// map: sorted keys), so the bytes are those of encoding it whole.
	data, err := json.Marshal(cluster)
	if err != nil {
		return "", fmt.Errorf("encoding %s: %w", EnvTFConfig, err)
	}
	return string(data), nil
}

const tfPrefix, tfTypeKey, tfIndexKey, tfEnd = `{"cluster":`, `,"task":{"type":`, `,"index":`, `},"environment":"cloud"}`

// config is the replica's whole TF_CONFIG.
func (c *tfCluster) config(replica framework.ReplicaRef) string { return tfConfig(c.cluster, replica) }

// tfConfig is TF_CONFIG with cluster as its "cluster" value and the
// replica's task, as encoding the whole document would give.
func tfConfig(cluster string, replica framework.ReplicaRef) string {
	return tfPrefix + cluster + tfTypeKey + tfTaskType(replica.Type) + tfIndexKey + strconv.Itoa(replica.Index) + tfEnd
}

// longest is the length of the longest TF_CONFIG of job: the last replica's
// of the type with the longest task.
func (c *tfCluster) longest(job *v1alpha1.TrainJob) int {
	longest := 0
	for rt := range job.Spec.ReplicaSpecs {
		if n := framework.Count(job, rt); n > 0 {
			longest = max(longest, len(tfPrefix)+len(c.cluster)+len(tfTypeKey)+len(tfTaskType(rt))+len(tfIndexKey)+len(strconv.Itoa(n-1))+len(tfEnd))
		}
	}
	return longest
}

// tfTaskType is the task's type as TF_CONFIG encodes it: quoted, lower case.
func tfTaskType(rt v1alpha1.ReplicaType) string {
	data, _ := json.Marshal(strings.ToLower(string(rt))) // a string always encodes
	return string(data)
}
