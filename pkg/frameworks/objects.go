package frameworks

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// Prepare computes once what every pod of job shares, for the job's
// framework to configure each pod with.
func Prepare(job *v1alpha1.TrainJob, at Placement) (PodConfigurer, error) {
	f, err := For(job.Spec.Framework)
	if err != nil {
		return nil, err
	}
	return f.Prepare(job, at)
}

// ConfigurePod configures one pod as Prepare followed by its
// ConfigurePod: fine for one replica, but a caller configuring every
// replica prepares the job once instead.
func ConfigurePod(job *v1alpha1.TrainJob, at Placement, replica ReplicaRef, spec *corev1.PodSpec) error {
	pods, err := Prepare(job, at)
	if err != nil {
		return err
	}
	return pods.ConfigurePod(replica, spec)
}

// ConfigMaps returns the ConfigMaps the job's pods mount, with only their
// name, data and immutability set.
func ConfigMaps(job *v1alpha1.TrainJob, at Placement) ([]*corev1.ConfigMap, error) {
	if s, ok := of(job).(framework.SharedObjects); ok {
		return s.ConfigMaps(job, at)
	}
	return nil, nil
}

// ConfigMapNames names the ConfigMaps ConfigMaps returns, for any job,
// valid or not, without computing their data.
func ConfigMapNames(job *v1alpha1.TrainJob, jobName string) []string {
	if s, ok := of(job).(framework.SharedObjects); ok {
		return s.ConfigMapNames(job, jobName)
	}
	return nil
}

// Secrets returns the Secrets the job's pods mount, with only their name,
// type and data set.
func Secrets(job *v1alpha1.TrainJob, at Placement, keys SSHKeyPair) ([]*corev1.Secret, error) {
	if s, ok := of(job).(framework.SharedObjects); ok {
		return s.Secrets(job, at, keys)
	}
	return nil, nil
}

// SharedLabels are the labels the framework's operator puts on the job's
// shared objects (its Service, ConfigMaps and Secrets), nil for none.
func SharedLabels(job *v1alpha1.TrainJob, jobName string) map[string]string {
	if s, ok := of(job).(framework.SharedObjects); ok {
		return s.Labels(jobName)
	}
	return nil
}

// SSHSecret names the Secret that holds the job's SSH key pair and the key
// of its public key; ok is false for a job whose replicas use none.
func SSHSecret(job *v1alpha1.TrainJob, jobName string) (name, publicKeyKey string, ok bool) {
	if s, is := of(job).(framework.SSHKeys); is {
		name, publicKeyKey = s.SSHSecret(jobName)
		return name, publicKeyKey, true
	}
	return "", "", false
}

// Local returns what the job's framework needs to run as processes on one
// machine; nil when it needs nothing more than its addresses rewritten.
func Local(job *v1alpha1.TrainJob) framework.Local {
	l, _ := of(job).(framework.Local)
	return l
}
