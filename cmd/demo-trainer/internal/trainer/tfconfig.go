package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Task types of a TF_CONFIG cluster (TensorFlow's lower-case names, as the
// Kubeflow Training Operator writes them).
const (
	taskPS        = "ps"
	taskWorker    = "worker"
	taskChief     = "chief"
	taskMaster    = "master" // TensorFlow 1's name for the chief
	taskEvaluator = "evaluator"
)

// TFConfig is the TF_CONFIG environment variable: the cluster's addresses
// per task type and this replica's own task.
type TFConfig struct {
	Cluster map[string][]string `json:"cluster"`
	Task    struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	} `json:"task"`
	Environment string `json:"environment,omitempty"`
}

// ParseTFConfig parses and checks TF_CONFIG for parameter-server training:
// at least one ps, at least one chief or worker, and a task that exists
// (or is the evaluator, which the cluster never lists).
func ParseTFConfig(raw string) (TFConfig, error) {
	var c TFConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return c, fmt.Errorf("parsing TF_CONFIG: %w", err)
	}
	if len(c.Cluster[taskPS]) == 0 {
		return c, errors.New("TF_CONFIG cluster has no ps tasks; this trainer's TensorFlow topology is parameter-server training")
	}
	if len(c.trainingTasks()) == 0 {
		return c, errors.New("TF_CONFIG cluster has no chief or worker tasks")
	}
	if c.Task.Type == taskEvaluator {
		// The evaluator is not part of the training cluster, so it is not listed.
		return c, nil
	}
	members, known := c.Cluster[c.Task.Type]
	if !known {
		return c, fmt.Errorf("TF_CONFIG task.type %q is not a task type of the cluster", c.Task.Type)
	}
	if c.Task.Index < 0 || c.Task.Index >= len(members) {
		return c, fmt.Errorf("TF_CONFIG task.index %d is outside the %d %s tasks", c.Task.Index, len(members), c.Task.Type)
	}
	for _, addr := range c.Cluster[taskPS] {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return c, fmt.Errorf("TF_CONFIG ps address %q: %w", addr, err)
		}
	}
	return c, nil
}

// taskID names a task the way TensorFlow logs do: "worker/1".
func taskID(taskType string, index int) string { return taskType + "/" + strconv.Itoa(index) }

// Self is this replica's task ID.
func (c TFConfig) Self() string { return taskID(c.Task.Type, c.Task.Index) }

// trainingTasks are the tasks that compute gradients, in rank order: the
// chief (or TensorFlow 1's master) first, then the workers.
func (c TFConfig) trainingTasks() []string {
	var tasks []string
	for _, t := range []string{taskChief, taskMaster, taskWorker} {
		for i := range c.Cluster[t] {
			tasks = append(tasks, taskID(t, i))
		}
	}
	return tasks
}

// trainingRank is this task's data shard among the training tasks, and
// their number; ok is false for tasks that do not train.
func (c TFConfig) trainingRank() (rank, world int, ok bool) {
	tasks := c.trainingTasks()
	for i, t := range tasks {
		if t == c.Self() {
			return i, len(tasks), true
		}
	}
	return 0, len(tasks), false
}

// isDecider says whether this task decides when training is over: the
// chief if there is one, else worker 0 — the replica whose success is the
// job's success under Kubeflow's default success policy.
func (c TFConfig) isDecider() bool { return c.trainingTasks()[0] == c.Self() }

// shardRange is the slice of the weight vector parameter server index of
// shards holds: contiguous, nearly equal, covering every feature once.
func shardRange(features, shards, index int) (start, end int) {
	return index * features / shards, (index + 1) * features / shards
}
