package framework

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// EnvPythonUnbuffered turns off Python's output buffering, so a replica's
// log shows its lines as they are printed; the Training Operator sets it
// for every framework but TensorFlow and MPI.
const EnvPythonUnbuffered = "PYTHONUNBUFFERED"

// MaxEnvVarSize is the most bytes Linux passes a new process in one
// environment string, "NAME=value" and its terminating NUL (MAX_ARG_STRLEN:
// 32 pages of 4 KiB). A longer one makes execve fail with E2BIG ("argument
// list too long"), so the container never starts.
const MaxEnvVarSize = 131072

// CheckEnvVarSize rejects a variable whose value grows with the job's
// replicas once it no longer fits MaxEnvVarSize; replicas is how many the
// job runs and names says which names make up each entry.
func CheckEnvVarSize(replicas int, name string, valueLen int, names string) error {
	if size := len(name) + len("=") + valueLen + 1; size > MaxEnvVarSize {
		return fmt.Errorf("spec.replicaSpecs: with %d replicas %s would be %d bytes, and Linux starts no process with an environment variable (NAME=value) over %d bytes: no replica could start; run fewer replicas or shorten %s",
			replicas, name, valueLen, MaxEnvVarSize, names)
	}
	return nil
}

// AppendToEveryContainer appends env to every (non-init) container, as the
// Training Operator does for PyTorch, JAX, XGBoost and Paddle.
func AppendToEveryContainer(spec *corev1.PodSpec, env []corev1.EnvVar) {
	for i := range spec.Containers {
		spec.Containers[i].Env = append(spec.Containers[i].Env, env...)
	}
}

// EnvVar is a variable with a plain value.
func EnvVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// Itoa spells n in decimal.
func Itoa(n int) string { return strconv.Itoa(n) }
