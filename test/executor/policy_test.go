package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// repoRoot is the repository's top directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// applyAdmissionPolicy binds the shipped ValidatingAdmissionPolicy to ns alone (named
// after it, so the tests sharing the cluster are not held to it).
func applyAdmissionPolicy(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	policies, err := testutil.ReadAdmissionPolicies(repoRoot(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { policies.Delete(context.Background(), c.Client) })
	if err := policies.Apply(context.Background(), c.Client); err != nil {
		t.Fatal(err)
	}
}

// applySettings creates the namespace's trainstep-policy ConfigMap, deploy/policy.yaml with
// data set over it, and returns the manifest written to a file (what --policy-file reads).
func applySettings(t *testing.T, c *cluster.Cluster, ns string, data map[string]string) string {
	t.Helper()
	var cm corev1.ConfigMap
	deployFile(t, "policy.yaml", &cm)
	for k, v := range data {
		cm.Data[k] = v
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	manifest, err := yaml.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// boundClaim creates the claim name in ns, bound to a PersistentVolume of its own (the
// scheduler places no pod whose claim is not bound); it goes with the test.
func boundClaim(t *testing.T, c *cluster.Cluster, ns, name string) {
	t.Helper()
	ctx := context.Background()
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	noClass := ""
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: size, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example.com", Path: "/datasets"}},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			Resources: corev1.VolumeResourceRequirements{Requests: size}, StorageClassName: &noClass, VolumeName: pv.Name},
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The common cases the settings allow — a token from a Secret in the environment, a
// dataset claim, an image pull secret — run to success as the step's ServiceAccount, with
// the shipped admission policy bound to the namespace and reading the same settings the
// step reads (--policy-file); the replicas carry them. Without the settings the run ends
// Invalid (exit 11) naming each field and the setting that would allow it, and creates
// nothing.
func TestAllowListedSecretsClaimsAndPullSecretsRun(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	applyDeploy(t, c, ns, false)
	settings := applySettings(t, c, ns, map[string]string{"allowedSecrets": "hf-token,registry-*", "allowedPVCs": "datasets"})
	applyAdmissionPolicy(t, c, ns)
	boundClaim(t, c, ns, "datasets")
	kubeconfig := c.KubeconfigForToken(t, c.ServiceAccountToken(t, ns, "trainstep"), ns)

	keep := v1alpha1.CleanPodPolicyNone
	job := newJob("allowed", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, exitsAfter("2s", 0)).with(func(j *v1alpha1.TrainJob) {
		j.Spec.RunPolicy.CleanPodPolicy = &keep
		pod := &j.Spec.ReplicaSpecs[worker].Template.Spec
		pod.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry-pull"}}
		pod.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets", ReadOnly: true}}}}
		main := &pod.Containers[0]
		main.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}}
		main.Env = []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "token"}}}}
	})
	manifest := writeFile(t, job.yaml(t))

	refused := startBinary(t, "run", "-f", manifest, "--kubeconfig", kubeconfig)
	if code := refused.wait(t, time.Minute); code != result.ExitInvalid {
		t.Fatalf("without the settings: exit %d, want %d; stderr:\n%s", code, result.ExitInvalid, refused.stderr)
	}
	const tmpl = "spec.replicaSpecs.Worker.template.spec."
	for _, field := range []string{
		tmpl + "volumes[0].persistentVolumeClaim.claimName: Forbidden", tmpl + "imagePullSecrets[0].name: Forbidden",
		tmpl + "containers[0].env[0].valueFrom.secretKeyRef.name: Forbidden", "--allowed-secrets", "--allowed-pvcs",
	} {
		if !strings.Contains(refused.stderr.String(), field) {
			t.Errorf("without the settings: stderr does not name %s:\n%s", field, refused.stderr)
		}
	}
	checkNothingOfTheJob(t, c, ns, "allowed")

	ran := startBinary(t, "run", "-f", manifest, "--kubeconfig", kubeconfig, "--policy-file", settings)
	if code := ran.wait(t, 2*time.Minute); code != result.ExitSucceeded {
		t.Fatalf("with the settings: exit %d, want %d; stderr:\n%s", code, result.ExitSucceeded, ran.stderr)
	}
	pods := listPods(t, c, ns, "allowed")
	if len(pods) != 2 {
		t.Fatalf("%d pods kept, want the 2 workers", len(pods))
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded || len(p.Spec.ImagePullSecrets) != 1 || p.Spec.Volumes[0].PersistentVolumeClaim == nil ||
			p.Spec.Containers[0].Env[0].ValueFrom == nil || p.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name != "hf-token" {
			t.Errorf("pod %s (%s) lacks what the job allowed: pull secrets %v, volumes %v, env %v", p.Name, p.Status.Phase,
				p.Spec.ImagePullSecrets, p.Spec.Volumes, p.Spec.Containers[0].Env)
		}
	}
}
