package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/trainerstatus"
)

// TrainerStatusEndpoint says that the step serves the job's progress
// endpoint (Kubeflow Trainer's protocol) on Port of its own pod.
type TrainerStatusEndpoint struct {
	Port int32
}

// TrainerStatusServicePort is the port of the <job>-status Service, so the
// URL in the replicas' environment needs none.
const TrainerStatusServicePort = 443

// trainerStatusVolume names the volume holding the CA and the token.
const trainerStatusVolume = "kubeflow-trainer-status"

// TrainerStatusURL is the endpoint's URL as the replicas see it: the
// <job>-status Service, with Kubeflow Trainer's path for the job.
func TrainerStatusURL(namespace, jobName string) string {
	return "https://" + v1alpha1.TrainerStatusName(jobName) + "." + namespace + ".svc" + trainerstatus.Path(namespace, jobName)
}

// TrainerStatusHosts are the names the serving certificate is made for.
func TrainerStatusHosts(namespace, jobName string) []string {
	svc := v1alpha1.TrainerStatusName(jobName)
	return []string{svc + "." + namespace + ".svc", svc, svc + "." + namespace, svc + "." + namespace + ".svc.cluster.local", "localhost", "127.0.0.1"}
}

// trainerStatusObjects renders the endpoint's two Secrets (the CA and the
// token the replicas mount; the serving pair only the step reads) and its
// Service, which selects the step's own pod by LabelTrainerStatus: the
// job's identity, which no other job's step can put on its pod.
func (r *Renderer) trainerStatusObjects(in Inputs) ([]*corev1.Secret, *corev1.Service, error) {
	if in.TrainerStatus == nil {
		return nil, nil, fmt.Errorf("rendering job %q: the progress endpoint needs its CA, certificate and token", r.id.JobName)
	}
	name := v1alpha1.TrainerStatusName(r.id.JobName)
	secret := func(name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{
			TypeMeta:   typeMeta("Secret"),
			ObjectMeta: jobObjectMeta(r.id, name, JobLabels(r.id)),
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
	}
	secrets := []*corev1.Secret{
		secret(name, in.TrainerStatus.ClientData()),
		secret(v1alpha1.TrainerStatusTLSName(r.id.JobName), in.TrainerStatus.ServingData()),
	}
	service := &corev1.Service{
		TypeMeta:   typeMeta("Service"),
		ObjectMeta: jobObjectMeta(r.id, name, JobLabels(r.id)),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{v1alpha1.LabelTrainerStatus: TrainerStatusSelectorValue(r.id)},
			Ports: []corev1.ServicePort{{
				Name: "https", Port: TrainerStatusServicePort, TargetPort: intstr.FromInt32(r.id.TrainerStatus.Port), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	return secrets, service, nil
}

// TrainerStatusSelectorValue is the value of LabelTrainerStatus on the
// step pod that serves the job's endpoint: the job's identity (its name
// when the run has none, as `trainstep render` shows it).
func TrainerStatusSelectorValue(id Identity) string {
	if id.OwnerID != "" {
		return id.OwnerID
	}
	return id.JobName
}

// addTrainerStatus gives every container of the pod the endpoint's
// environment, under both of Kubeflow's names, and mounts the CA and the
// token (not the serving key) where Kubeflow Trainer mounts them; a client
// reads the token file again as it posts. The variables come before the
// template's own, so the template may refer to them ($(KUBEFLOW_TRAINER_SERVER_URL));
// a variable the template sets itself is left as it is.
func (r *Renderer) addTrainerStatus(spec *corev1.PodSpec) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: trainerStatusVolume,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  v1alpha1.TrainerStatusName(r.id.JobName),
			Items:       []corev1.KeyToPath{{Key: trainerstatus.CAKey, Path: trainerstatus.CAKey}, {Key: trainerstatus.TokenKey, Path: trainerstatus.TokenKey}},
			DefaultMode: ptrTo(int32(0o444)),
		}},
	})
	vars := trainerstatus.Environment(TrainerStatusURL(r.id.Namespace, r.id.JobName),
		trainerstatus.MountDir+"/"+trainerstatus.CAKey, trainerstatus.MountDir+"/"+trainerstatus.TokenKey)
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			env := make([]corev1.EnvVar, 0, len(vars)+len(c.Env))
			for _, v := range vars {
				if !hasEnv(c, v.Name) {
					env = append(env, corev1.EnvVar{Name: v.Name, Value: v.Value})
				}
			}
			c.Env = append(env, c.Env...)
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: trainerStatusVolume, MountPath: trainerstatus.MountDir, ReadOnly: true})
		}
	}
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, v := range c.Env {
		if v.Name == name {
			return true
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }
