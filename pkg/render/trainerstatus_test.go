package render_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/trainerstatus"
)

var statusMaterial = &trainerstatus.Material{CACert: []byte("ca"), ServingCert: []byte("crt"), ServingKey: []byte("key"), Token: []byte("token")}

func withTrainerStatus(id render.Identity) render.Identity {
	id.TrainerStatus = &render.TrainerStatusEndpoint{Port: 8443}
	return id
}

func TestRenderTrainerStatusEnvInEveryContainer(t *testing.T) {
	job := newJob(v1alpha1.FrameworkPyTorch, "mnist", replicas{master: 1, worker: 2}, func(j *v1alpha1.TrainJob) {
		spec := &j.Spec.ReplicaSpecs[worker].Template.Spec
		spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "busybox"}}
		spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox",
			Env: []corev1.EnvVar{{Name: trainerstatus.EnvURL, Value: "https://elsewhere"}}})
	})
	objs, err := render.Render(job, withTrainerStatus(identity("team-a", "mnist")), render.Inputs{TrainerStatus: statusMaterial})
	require.NoError(t, err)
	require.Len(t, objs.Pods, 3)
	for _, pod := range objs.Pods {
		all := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
		for _, c := range all {
			env := map[string]string{}
			for _, v := range c.Env {
				env[v.Name] = v.Value
			}
			wantURL := "https://mnist-status.team-a.svc/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/mnist/status"
			if c.Name == "sidecar" {
				wantURL = "https://elsewhere" // the template's own value is kept
			}
			assert.Equal(t, wantURL, env[trainerstatus.EnvURL], "%s/%s", pod.Name, c.Name)
			assert.Equal(t, "/var/run/secrets/kubeflow/trainer/ca.crt", env[trainerstatus.EnvCACert], "%s/%s", pod.Name, c.Name)
			assert.Equal(t, "/var/run/secrets/kubeflow/trainer/token", env[trainerstatus.EnvToken], "%s/%s", pod.Name, c.Name)
			// The names Trainer's TrainJobStatus plugin, the Kubeflow SDK
			// and the transformers integration read.
			if c.Name != "sidecar" {
				assert.Equal(t, wantURL, env[trainerstatus.EnvServerURL], "%s/%s", pod.Name, c.Name)
			}
			assert.Equal(t, "/var/run/secrets/kubeflow/trainer/ca.crt", env[trainerstatus.EnvServerCACert], "%s/%s", pod.Name, c.Name)
			assert.Equal(t, "/var/run/secrets/kubeflow/trainer/token", env[trainerstatus.EnvServerToken], "%s/%s", pod.Name, c.Name)
			assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "kubeflow-trainer-status", MountPath: trainerstatus.MountDir, ReadOnly: true})
		}
		var volume *corev1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == "kubeflow-trainer-status" {
				volume = &pod.Spec.Volumes[i]
			}
		}
		require.NotNil(t, volume, pod.Name)
		assert.Equal(t, "mnist-status", volume.Secret.SecretName)
		// The replicas get the CA and the token, never the serving key.
		assert.Equal(t, []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}, {Key: "token", Path: "token"}}, volume.Secret.Items)
	}
}

// The endpoint's variables come before the template's own, so a template
// may refer to them; one the template sets itself is not added again.
func TestRenderTrainerStatusEnvComesBeforeTheTemplates(t *testing.T) {
	job := newJob(v1alpha1.FrameworkPyTorch, "mnist", replicas{worker: 1}, func(j *v1alpha1.TrainJob) {
		c := &j.Spec.ReplicaSpecs[worker].Template.Spec.Containers[0]
		c.Env = []corev1.EnvVar{
			{Name: "PROGRESS_URL", Value: "$(" + trainerstatus.EnvServerURL + ")"},
			{Name: trainerstatus.EnvServerToken, Value: "/elsewhere/token"},
		}
	})
	objs, err := render.Render(job, withTrainerStatus(identity("team-a", "mnist")), render.Inputs{TrainerStatus: statusMaterial})
	require.NoError(t, err)
	var names []string
	for _, v := range objs.Pods[0].Spec.Containers[0].Env[:7] {
		names = append(names, v.Name)
	}
	assert.Equal(t, []string{trainerstatus.EnvServerURL, trainerstatus.EnvServerCACert,
		trainerstatus.EnvURL, trainerstatus.EnvCACert, trainerstatus.EnvToken, "PROGRESS_URL", trainerstatus.EnvServerToken}, names)
	assert.Equal(t, "/elsewhere/token", objs.Pods[0].Spec.Containers[0].Env[6].Value)
}

func TestRenderTrainerStatusSecretAndService(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{ps: 1, worker: 2})
	objs, err := render.Render(job, withTrainerStatus(identity("team-a", "mnist")), render.Inputs{TrainerStatus: statusMaterial})
	require.NoError(t, err)
	secrets := map[string]*corev1.Secret{}
	for _, s := range objs.Secrets {
		secrets[s.Name] = s
	}
	secret := secrets["mnist-status"]
	require.NotNil(t, secret)
	assert.Equal(t, statusMaterial.ClientData(), secret.Data)
	assert.NotContains(t, secret.Data, "tls.key", "the Secret replicas may mount holds no serving key")
	require.NotNil(t, secrets["mnist-status-tls"])
	assert.Equal(t, statusMaterial.ServingData(), secrets["mnist-status-tls"].Data)
	assert.Equal(t, "mnist", secret.Labels[v1alpha1.LabelJobName])
	assert.Equal(t, controllerRef(), secret.OwnerReferences)
	var svc *corev1.Service
	for _, s := range objs.Services {
		if s.Name == "mnist-status" {
			svc = s
		}
	}
	require.NotNil(t, svc)
	assert.Equal(t, map[string]string{v1alpha1.LabelTrainerStatus: "mnist"}, svc.Spec.Selector, "the Service selects the step's pod, no replica")
	assert.Empty(t, svc.Spec.ClusterIP, "a ClusterIP Service: its address outlives the step pod")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(443), svc.Spec.Ports[0].Port)
	assert.Equal(t, intstr.FromInt32(8443), svc.Spec.Ports[0].TargetPort)
	assert.Equal(t, "mnist", svc.Labels[v1alpha1.LabelJobName])
}

func TestRenderTrainerStatusNeedsItsMaterial(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{worker: 1})
	_, err := render.Render(job, withTrainerStatus(identity("team-a", "mnist")), render.Inputs{})
	assert.ErrorContains(t, err, "progress endpoint")
}

func TestRenderWithoutTrainerStatusAddsNothing(t *testing.T) {
	job := newJob(v1alpha1.FrameworkTensorFlow, "mnist", replicas{worker: 1})
	objs, err := render.Render(job, identity("team-a", "mnist"), render.Inputs{})
	require.NoError(t, err)
	for _, c := range objs.Pods[0].Spec.Containers {
		for _, v := range c.Env {
			assert.NotEqual(t, trainerstatus.EnvURL, v.Name)
		}
	}
	for _, s := range objs.Services {
		assert.NotEqual(t, "mnist-status", s.Name)
	}
}
