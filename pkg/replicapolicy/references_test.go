package replicapolicy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// fieldsOf lists the paths of errs, under the worker's pod spec when they
// are there (the prefix cut), else whole.
func fieldsOf(errs field.ErrorList) []string {
	const p = "spec.replicaSpecs.Worker.template.spec."
	var got []string
	for _, e := range errs {
		got = append(got, strings.TrimPrefix(e.Field, p))
	}
	return got
}

func volume(name string, src corev1.VolumeSource) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: src}
}

// Every way a pod reads a Secret, a ConfigMap or a claim is refused unless
// it is the job's own or on the template author's list, each error naming
// the field and the setting; the lists take patterns.
func TestCheckHoldsSecretsConfigMapsAndClaimsToTheLists(t *testing.T) {
	secretEnv := corev1.EnvVar{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "token"}}}
	configEnv := corev1.EnvVar{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}}
	everything := corev1.PodSpec{
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		Containers: []corev1.Container{{
			Name: "jax", Image: "example.com/jax:1", Env: []corev1.EnvVar{{Name: "PLAIN", Value: "1"}, secretEnv, configEnv},
			EnvFrom: []corev1.EnvFromSource{
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "artifact-store"}}},
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "team-b-settings"}}},
			},
		}},
		Volumes: []corev1.Volume{
			volume("ssh", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "other-job-ssh"}}),
			volume("mine", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "j-status"}}),
			volume("both", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "other-job-status"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "other-job-config"}}},
			}}}),
			volume("data", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "team-b-data"}}),
			volume("ca", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}),
			volume("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
			volume("clone", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{DataSourceRef: &corev1.TypedObjectReference{Kind: "VolumeSnapshot", Name: "team-b-nightly"}}}}}),
			volume("fresh", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}),
			volume("csi", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io",
				NodePublishSecretRef: &corev1.LocalObjectReference{Name: "vault-creds"}}}),
		},
	}
	refused := []string{
		"volumes[0].secret.secretName",
		"volumes[2].projected.sources[0].secret.name",
		"volumes[2].projected.sources[2].configMap.name",
		"volumes[3].persistentVolumeClaim.claimName",
		"volumes[6].ephemeral.volumeClaimTemplate.spec.dataSourceRef.name",
		"volumes[8].csi.driver",
		"volumes[8].csi.nodePublishSecretRef.name",
		"containers[0].envFrom[0].secretRef.name",
		"containers[0].envFrom[1].configMapRef.name",
		"containers[0].env[1].valueFrom.secretKeyRef.name",
		"containers[0].env[2].valueFrom.configMapKeyRef.name",
		"imagePullSecrets[0].name",
	}
	allowed := Policy{
		Secrets:    []string{"other-job-*", "artifact-store", "hf-token", "registry", "vault-creds"},
		ConfigMaps: []string{"settings", "team-b-*", "other-job-config"},
		PVCs:       []string{"team-b-data", "VolumeSnapshot/team-b-*"},
		CSIDrivers: []string{"secrets-store.csi.k8s.io"},
	}
	cases := []struct {
		name string
		p    Policy
		want []string
	}{
		{"nothing listed", Policy{}, refused},
		{"all listed", allowed, nil},
		{"listed, --allow-privileged lifts none of it", Policy{AllowPrivileged: true}, refused},
		{"a local run has no namespace to read", Policy{Local: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := Check(jobWithWorker(everything), tc.p)
			if diff := cmp.Diff(tc.want, fieldsOf(errs)); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
			for _, e := range errs {
				if !strings.Contains(e.Detail, "--allowed-") || !strings.Contains(e.Detail, "in the trainstep-policy ConfigMap") {
					t.Errorf("%s: %q names no setting", e.Field, e.Detail)
				}
			}
		})
	}
}

// A volume kind outside the safe set is refused, naming the kind's field,
// unless listed; hostPath stays --allow-privileged's; the Secret of an
// allowed kind is still held to the Secret list.
func TestCheckHoldsVolumeKindsToTheSafeSet(t *testing.T) {
	pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "jax", Image: "example.com/jax:1"}}, Volumes: []corev1.Volume{
		volume("nfs", corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.team-b", Path: "/"}}),
		volume("flex", corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "x/y", SecretRef: &corev1.LocalObjectReference{Name: "flex-creds"}}}),
		volume("git", corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{Repository: "https://example.com/r.git"}}),
		volume("iscsi", corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.1", IQN: "iqn.x", Lun: 0}}),
		volume("root", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}),
		volume("downward", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}),
	}}
	cases := []struct {
		name string
		p    Policy
		want []string
	}{
		{"nothing listed", Policy{}, []string{"volumes[0].nfs", "volumes[1].flexVolume", "volumes[1].flexVolume.secretRef.name", "volumes[2].gitRepo", "volumes[3].iscsi", "volumes[4].hostPath"}},
		{"kinds listed", Policy{VolumeTypes: []string{"nfs", "flexVolume", "gitRepo", "iscsi"}}, []string{"volumes[1].flexVolume.secretRef.name", "volumes[4].hostPath"}},
		{"privileged", Policy{AllowPrivileged: true}, []string{"volumes[0].nfs", "volumes[1].flexVolume", "volumes[1].flexVolume.secretRef.name", "volumes[2].gitRepo", "volumes[3].iscsi"}},
		{"everything", Policy{AllowPrivileged: true, VolumeTypes: []string{"*"}, Secrets: []string{"flex-creds"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fieldsOf(Check(jobWithWorker(pod), tc.p))); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
}

// A job's own Secrets and ConfigMaps are those its framework makes: an
// MPI job's SSH key and hostfile, a distributed TensorFlow job's cluster,
// every job's progress CA and token. The progress endpoint's serving key
// is never a replica's, and another framework's names are not a job's own.
func TestOwnObjectsAreThoseTheFrameworkMakes(t *testing.T) {
	mount := func(secret, configMap string) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/x:1"}}, Volumes: []corev1.Volume{
			volume("s", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}),
			volume("c", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}),
		}}
	}
	two := int32(2)
	withFramework := func(fw v1alpha1.Framework, pod corev1.PodSpec) *v1alpha1.TrainJob {
		job := jobWithWorker(pod)
		job.Spec.Framework = fw
		job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeWorker].Replicas = &two
		if fw == v1alpha1.FrameworkMPI {
			job.Spec.ReplicaSpecs[v1alpha1.ReplicaTypeLauncher] = &v1alpha1.ReplicaSpec{Template: corev1.PodTemplateSpec{Spec: pod}}
		}
		return job
	}
	cases := []struct {
		name string
		job  *v1alpha1.TrainJob
		want []string
	}{
		{"MPI's key and hostfile", withFramework(v1alpha1.FrameworkMPI, mount("j-ssh", "j-config")), nil},
		{"TensorFlow's cluster and the progress token", withFramework(v1alpha1.FrameworkTensorFlow, mount("j-status", "j-tf-cluster")), nil},
		{"MPI's names in a JAX job", withFramework(v1alpha1.FrameworkJAX, mount("j-ssh", "j-config")),
			[]string{"volumes[0].secret.secretName", "volumes[1].configMap.name"}},
		{"the progress endpoint's serving key", withFramework(v1alpha1.FrameworkTensorFlow, mount("j-status-tls", "j-tf-cluster")),
			[]string{"volumes[0].secret.secretName"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range Check(tc.job, Policy{}) {
				if strings.HasPrefix(e.Field, "spec.replicaSpecs.Worker.") {
					got = append(got, strings.TrimPrefix(e.Field, "spec.replicaSpecs.Worker.template.spec."))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("refused fields of the worker (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	cases := []struct {
		patterns []string
		name     string
		want     bool
	}{
		{[]string{"hf-token"}, "hf-token", true},
		{[]string{"hf-token"}, "hf-token-2", false},
		{[]string{"wandb-*"}, "wandb-key", true},
		{[]string{"wandb-*"}, "wandb-", true},
		{[]string{"wandb-*"}, "team-wandb-key", false},
		{[]string{"*-data"}, "team-a-data", true},
		{[]string{"team-*-data"}, "team-a-data", true},
		{[]string{"team-*-data"}, "team-a-datax", false},
		{[]string{"a*b*c"}, "abc", true},
		{[]string{"a*b*c"}, "acb", false},
		{[]string{"*"}, "anything", true},
		{nil, "anything", false},
	}
	for _, tc := range cases {
		if got := Matches(tc.patterns, tc.name); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", tc.patterns, tc.name, got, tc.want)
		}
	}
}
