package executor_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/pkg/trainerstatus"
	"github.com/trainstep/trainstep/test/cluster"
)

// statusClient posts to a job's progress endpoint as a replica would, with
// the CA and token of the job's Secret, at the step's address on this host
// (the Service's target port: KWOK's replicas have no network).
type statusClient struct {
	http  *http.Client
	url   string
	token string
}

func newStatusClient(t *testing.T, c *cluster.Cluster, ns, job string) *statusClient {
	t.Helper()
	name := v1alpha1.TrainerStatusName(job)
	var svc *corev1.Service
	var secret *corev1.Secret
	testutil.Eventually(t, time.Minute, "the progress endpoint's Service and Secret", func() (bool, error) {
		var err error
		svc, err = c.Client.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		secret, err = c.Client.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data[trainerstatus.CAKey]) {
		t.Fatal("the Secret's ca.crt holds no certificate")
	}
	port := svc.Spec.Ports[0].TargetPort.IntValue()
	return &statusClient{
		http:  &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 64}},
		url:   "https://127.0.0.1:" + strconv.Itoa(port) + trainerstatus.Path(ns, job),
		token: string(secret.Data[trainerstatus.TokenKey]),
	}
}

func statusBody(percent int, loss string) []byte {
	return []byte(fmt.Sprintf(`{"trainerStatus": {"progressPercentage": %d, "metrics": [{"name": "loss", "value": %q}], "lastUpdatedTime": %q}}`,
		percent, loss, time.Now().UTC().Format(time.RFC3339)))
}

// post sends body with token and returns the answer's code; 0 when the
// endpoint cannot be reached.
func (s *statusClient) post(token string, body io.Reader) int {
	req, err := http.NewRequest(http.MethodPost, s.url, body)
	if err != nil {
		return 0
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// postUntilAccepted posts body until the endpoint answers 200 (it may
// still be starting, or rate-limiting an earlier flood).
func (s *statusClient) postUntilAccepted(t *testing.T, body []byte) {
	t.Helper()
	testutil.Eventually(t, time.Minute, "the endpoint to accept a status", func() bool {
		return s.post(s.token, bytes.NewReader(body)) == http.StatusOK
	})
}

// The step serves its job's progress endpoint: bad requests get the right
// answer, a flood of 1,000 posts in a second is answered 429 while the
// reconciler keeps up with the replicas, and the last status reaches the
// progress file, the outputs and an Event on the step's pod.
func TestProgressEndpointRefusesWhatIsNotTheJobsAndSurvivesAFlood(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owner := ownerPod(t, c, ns, "step-progress")
	// cleanPodPolicy All: the job's Secrets go with its last pod.
	job := newJob("progress", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, nil).with(func(j *v1alpha1.TrainJob) {
		all := v1alpha1.CleanPodPolicyAll
		j.Spec.RunPolicy.CleanPodPolicy = &all
	})
	progressFile := filepath.Join(t.TempDir(), "progress")
	runLog, record := recordLog()
	wait := startJob(t, c, ns, job.yaml(t), record, func(cfg *executor.Config) {
		cfg.OwnerPod, cfg.OwnerUID = owner.Name, string(owner.UID)
		cfg.TrainerStatus, cfg.TrainerStatusAddress, cfg.ProgressFile = true, "127.0.0.1:0", progressFile
	})
	waitRunning(t, c, ns, "progress", 2)
	client := newStatusClient(t, c, ns, "progress")

	step, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), owner.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := step.Labels[v1alpha1.LabelTrainerStatus], executor.RunIdentity(testIdentity(t)); got != want {
		t.Errorf("the step's pod has %s=%q, want the job's identity %s so the Service selects it", v1alpha1.LabelTrainerStatus, got, want)
	}
	for _, pod := range listPods(t, c, ns, "progress") {
		env := map[string]string{}
		for _, v := range pod.Spec.Containers[0].Env {
			env[v.Name] = v.Value
		}
		if want := "https://progress-status." + ns + ".svc" + trainerstatus.Path(ns, "progress"); env[trainerstatus.EnvURL] != want {
			t.Errorf("%s: %s=%q, want %q", pod.Name, trainerstatus.EnvURL, env[trainerstatus.EnvURL], want)
		}
	}

	refusals := []struct {
		name  string
		token string
		body  []byte
		code  int
	}{
		{"1 MiB body", client.token, bytes.Repeat([]byte(" "), 1<<20), http.StatusRequestEntityTooLarge},
		{"invalid JSON", client.token, []byte(`{"trainerStatus": `), http.StatusBadRequest},
		{"negative percentage", client.token, statusBody(-1, "1"), http.StatusBadRequest},
		{"percentage over 100", client.token, statusBody(101, "1"), http.StatusBadRequest},
		{"missing token", "", statusBody(50, "1"), http.StatusUnauthorized},
		{"wrong token", strings.Repeat("0", len(client.token)), statusBody(50, "1"), http.StatusUnauthorized},
	}
	for _, r := range refusals {
		if code := client.post(r.token, bytes.NewReader(r.body)); code != r.code {
			t.Errorf("%s: answered %d, want %d", r.name, code, r.code)
		}
	}
	client.postUntilAccepted(t, statusBody(10, "0.9"))
	runLog.waitLine(t, 10*time.Second, 0, "training 10% loss=0.9")

	// 1,000 posts within a second from 50 connections; meanwhile worker 1
	// finishes, and the reconciler must log it as promptly as ever.
	from := runLog.mark()
	codes := map[int]int{}
	var mu sync.Mutex
	var flood sync.WaitGroup
	start := time.Now()
	for g := 0; g < 50; g++ {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for i := 0; i < 20; i++ {
				code := client.post(client.token, bytes.NewReader(statusBody(20, "0.8")))
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	patchAnnotations(t, c, ns, "progress-worker-1", map[string]string{exitAfter: "0s", exitCode: "0"})
	patched := time.Now()
	runLog.waitLine(t, 10*time.Second, from, "1/2 running (1 succeeded)")
	lineAfter := time.Since(patched)
	flood.Wait()
	floodTook := time.Since(start)
	t.Logf("flood of 1000 posts took %s: %v; the reconciler logged worker 1's end %s after the patch", floodTook, codes, lineAfter)
	if codes[http.StatusTooManyRequests] < 950 || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 1000 {
		t.Errorf("answers to the flood %v, want all but a few 429 and the rest 200", codes)
	}

	client.postUntilAccepted(t, statusBody(100, "0.0123"))
	testutil.Eventually(t, 10*time.Second, "the progress file to say 100/100", func() bool {
		b, _ := readFileIfExists(progressFile)
		return b == "100/100"
	})
	patchAnnotations(t, c, ns, "progress-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	out := wait()
	if out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s (%v), want the job unaffected by the refused requests", out.res.Phase, out.err)
	}
	var status map[string]any
	if err := json.Unmarshal([]byte(out.output(t, "trainer-status.json")), &status); err != nil {
		t.Fatal(err)
	}
	if status["progressPercentage"] != float64(100) {
		t.Errorf("trainer-status.json %v, want the last status", status)
	}
	if got := out.output(t, "metrics.json"); got != `{"loss":0.0123}` {
		t.Errorf("metrics.json %s, want the reported loss", got)
	}
	if b, _ := readFileIfExists(progressFile); b != "100/100" {
		t.Errorf("the progress file says %q at the end, want 100/100", b)
	}
	testutil.Eventually(t, 10*time.Second, "Events on the step's pod for the first and the last status", func() (bool, error) {
		events, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + owner.Name})
		if err != nil {
			return false, err
		}
		reasons := map[string]string{}
		for _, e := range events.Items {
			reasons[e.Reason] = e.Message
		}
		return strings.Contains(reasons[executor.EventTrainerStatus], "training 10% loss=0.9") &&
			strings.Contains(reasons[executor.EventTrainerStatusFinal], "training 100% loss=0.0123"), nil
	})
	if _, err := c.Client.CoreV1().Secrets(ns).Get(context.Background(), "progress-status", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the progress endpoint's Secret is still there after the job: %v", err)
	}
}

// A step killed (SIGKILL) and run again, as Argo retries it, serves the
// same endpoint: the Service follows the label to the new step's pod, and
// the ranks' CA and token, read once, still work.
func TestProgressEndpointFollowsARetriedStep(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	first, second := ownerPod(t, c, ns, "step-try-1"), ownerPod(t, c, ns, "step-try-2")
	job := newJob("retried", v1alpha1.FrameworkTensorFlow).replicas(worker, 2, nil)
	file := writeFile(t, job.yaml(t))
	port := freePort(t)
	args := func(owner *corev1.Pod) []string {
		return []string{"run", "-f", file, "--kubeconfig", c.Kubeconfig, "-n", ns, "--owner-pod", owner.Name, "--owner-uid", string(owner.UID),
			"--trainer-status-address", "127.0.0.1:" + strconv.Itoa(port)}
	}
	p1 := startBinary(t, args(first)...)
	waitRunning(t, c, ns, "retried", 2)
	client := newStatusClient(t, c, ns, "retried")
	client.postUntilAccepted(t, statusBody(30, "0.5"))
	_ = p1.cmd.Process.Kill()
	p1.wait(t, 10*time.Second)

	p2 := startBinary(t, args(second)...)
	testutil.Eventually(t, time.Minute, "the label to move to the second step's pod", func() (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelTrainerStatus + "=" + executor.RunIdentity(testIdentity(t))})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 1 && pods.Items[0].UID == second.UID, nil
	})
	// The client still holds the first attempt's CA and token.
	client.postUntilAccepted(t, statusBody(60, "0.25"))
	patchAnnotations(t, c, ns, "retried-worker-0", map[string]string{exitAfter: "0s", exitCode: "0"})
	if code := p2.wait(t, time.Minute); code != 0 {
		t.Fatalf("the second step exited %d; stderr:\n%s", code, p2.stderr)
	}
	var status map[string]any
	if err := json.Unmarshal([]byte(readOutput(t, p2.outputsDir, "trainer-status.json")), &status); err != nil {
		t.Fatal(err)
	}
	if status["progressPercentage"] != float64(60) {
		t.Errorf("the second step's trainer-status.json %v, want the status sent to it", status)
	}
	if !strings.Contains(p2.stderr.String(), "the progress endpoint moved to this step from an earlier one") {
		t.Errorf("the second step does not say it took the endpoint over; stderr:\n%s", p2.stderr)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func readFileIfExists(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
