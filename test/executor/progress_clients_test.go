package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/trainerstatus"
	"github.com/trainstep/trainstep/test/cluster"
)

// mountedFiles writes what pod's volume mounted at dir holds, the Secret's
// keys at their paths, into a directory of the test's: the files a process
// of the pod reads (KWOK's pods run none).
func mountedFiles(t *testing.T, c *cluster.Cluster, pod corev1.Pod, dir string) string {
	t.Helper()
	var volume string
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.MountPath == dir && m.SubPath == "" {
			volume = m.Name
		}
	}
	local := t.TempDir()
	for _, v := range pod.Spec.Volumes {
		if v.Name != volume || v.Secret == nil {
			continue
		}
		secret, err := c.Client.CoreV1().Secrets(pod.Namespace).Get(context.Background(), v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range v.Secret.Items {
			if err := os.WriteFile(filepath.Join(local, item.Path), secret.Data[item.Key], 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return local
	}
	t.Fatalf("%s mounts no Secret volume at %s (a subPath mount would not see the token rotate)", pod.Name, dir)
	return ""
}

// A replica posting as Kubeflow's current clients do — the Kubeflow SDK,
// the transformers integration: KUBEFLOW_TRAINER_SERVER_URL, _CA_CERT and
// _TOKEN, the token file read again for every post — shows in the progress
// file and the outputs. The endpoint's variables come before the
// template's own, so the template may refer to them.
func TestProgressUnderTheNamesOfKubeflowsCurrentClients(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owner := ownerPod(t, c, ns, "step-clients")
	manifest := `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: clients}
spec:
  runPolicy: {cleanPodPolicy: All}
  pytorchReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: registry.example/hf:1
            command: [python, train.py, --report_to, kubeflow]
            env: [{name: PROGRESS_URL, value: $(KUBEFLOW_TRAINER_SERVER_URL)}]
`
	progressFile := filepath.Join(t.TempDir(), "progress")
	wait := startJob(t, c, ns, []byte(manifest), func(cfg *executor.Config) {
		cfg.OwnerPod, cfg.OwnerUID = owner.Name, string(owner.UID)
		cfg.TrainerStatus, cfg.TrainerStatusAddress, cfg.ProgressFile = true, "127.0.0.1:0", progressFile
	})
	waitRunning(t, c, ns, "clients", 1)
	pod := listPods(t, c, ns, "clients")[0]
	env := map[string]string{}
	var order []string
	for _, v := range pod.Spec.Containers[0].Env {
		env[v.Name] = v.Value
		order = append(order, v.Name)
	}
	if i, j := strings.Index(strings.Join(order, " "), trainerstatus.EnvServerURL), strings.Index(strings.Join(order, " "), "PROGRESS_URL"); i < 0 || j < i {
		t.Errorf("env %v: want %s before the template's PROGRESS_URL, which refers to it", order, trainerstatus.EnvServerURL)
	}
	for _, pair := range [][2]string{
		{trainerstatus.EnvServerURL, trainerstatus.EnvURL}, {trainerstatus.EnvServerCACert, trainerstatus.EnvCACert}, {trainerstatus.EnvServerToken, trainerstatus.EnvToken},
	} {
		if env[pair[0]] == "" || env[pair[0]] != env[pair[1]] {
			t.Errorf("%s=%q and %s=%q, want both names set alike", pair[0], env[pair[0]], pair[1], env[pair[1]])
		}
	}
	// The process's view of its files, where the variables point.
	files := mountedFiles(t, c, pod, trainerstatus.MountDir)
	local := func(path string) string {
		return filepath.Join(files, strings.TrimPrefix(path, trainerstatus.MountDir+"/"))
	}
	client := newStatusClient(t, c, ns, "clients") // the Service's address on this host, the CA of the job
	post := func(percent int, loss string) int {
		token, err := os.ReadFile(local(env[trainerstatus.EnvServerToken]))
		if err != nil {
			t.Fatal(err)
		}
		return client.post(strings.TrimSpace(string(token)), bytes.NewReader(statusBody(percent, loss)))
	}
	if _, err := os.ReadFile(local(env[trainerstatus.EnvServerCACert])); err != nil {
		t.Fatalf("the CA the variable names: %v", err)
	}
	testutil.Eventually(t, time.Minute, "a status posted as the SDK posts it", func() bool { return post(40, "0.5") == 200 })
	testutil.Eventually(t, 10*time.Second, "the progress file to say 40/100", func() bool {
		b, _ := readFileIfExists(progressFile)
		return b == "40/100"
	})
	testutil.Eventually(t, 10*time.Second, "the last status accepted", func() bool { return post(100, "0.125") == 200 })
	patchAnnotations(t, c, ns, "clients-worker-0", exitsAfter("0s", 0))
	out := wait()
	if out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%v)", out.res.Phase, out.err)
	}
	var status map[string]any
	if err := json.Unmarshal([]byte(out.output(t, "trainer-status.json")), &status); err != nil {
		t.Fatal(err)
	}
	if got := out.output(t, "metrics.json"); status["progressPercentage"] != float64(100) || got != `{"loss":0.125}` {
		t.Errorf("trainer-status.json %v, metrics.json %s; want the last status and its loss", status, got)
	}
	if b, _ := readFileIfExists(progressFile); b != "100/100" {
		t.Errorf("the progress file says %q at the end, want 100/100", b)
	}
}
