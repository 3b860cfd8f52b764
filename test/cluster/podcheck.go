package cluster

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodcheckImage is test/cluster/cmd/podcheck in a FROM-scratch image, imported (with
// ImportGoImage(ctx, PodcheckImage, PodcheckPackage)), never pulled.
const PodcheckImage = "docker.io/local/podcheck:test"

// PodcheckPackage is podcheck's main package, relative to the module root.
const PodcheckPackage = "./test/cluster/cmd/podcheck"

// PodcheckPod is a pod that runs podcheck once with args, its identity from the downward API.
func PodcheckPod(name string, args ...string) *corev1.Pod {
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           PodcheckImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            args,
				Env: []corev1.EnvVar{
					fieldEnv("POD_NAME", "metadata.name"),
					fieldEnv("POD_NAMESPACE", "metadata.namespace"),
					fieldEnv("NODE_NAME", "spec.nodeName"),
				},
			}},
		},
	}
}
