package executor_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// argoStep stands for one attempt of an Argo step: a pod that a Workflow
// controls, running as the step's ServiceAccount, and a kubeconfig with
// that pod's own bound token, as the kubelet mounts it.
type argoStep struct {
	workflow   *unstructured.Unstructured
	node       string
	pod        *corev1.Pod
	kubeconfig string
}

// newWorkflow creates a Workflow object (no Argo controller acts on it:
// it only owns the step pods, as Argo's do).
func newWorkflow(t *testing.T, c *cluster.Cluster, ns, name string) *unstructured.Unstructured {
	t.Helper()
	wf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"entrypoint": "train", "templates": []any{map[string]any{"name": "train", "container": map[string]any{"image": "trainstep:test"}}}},
	}}
	created, err := c.Dynamic().Resource(cluster.WorkflowResource).Namespace(ns).Create(context.Background(), wf, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating workflow %s: %v", name, err)
	}
	return created
}

// stepOf creates the pod of one attempt of node in wf.
func stepOf(t *testing.T, c *cluster.Cluster, ns string, wf *unstructured.Unstructured, node, podName string) argoStep {
	t.Helper()
	yes := true
	pod, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: map[string]string{v1alpha1.LabelWorkflow: wf.GetName()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: wf.GetName(), UID: wf.GetUID(), Controller: &yes}}},
		Spec: corev1.PodSpec{ServiceAccountName: "trainstep", Containers: []corev1.Container{{Name: "main", Image: "trainstep:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating step pod %s: %v", podName, err)
	}
	return argoStep{workflow: wf, node: node, pod: pod, kubeconfig: c.KubeconfigForToken(t, c.PodToken(t, pod), ns)}
}

// args are the train template's arguments for this attempt.
func (s argoStep) args(file, ns string) []string {
	return []string{"run", "-f", file, "--kubeconfig", s.kubeconfig, "-n", ns,
		"--owner-pod", s.pod.Name, "--owner-uid", string(s.pod.UID),
		"--workflow-name", s.workflow.GetName(), "--workflow-uid", string(s.workflow.GetUID()), "--workflow-node", s.node,
		"--lease-duration", "3s"}
}

// snapshot is what a job's objects are: by kind and name, their UID,
// labels and owners, whether they are being deleted, and a Secret's data
// (its hash).
func snapshot(t *testing.T, c *cluster.Cluster, ns, job string) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(key string, m metav1.Object, extra any) {
		b, err := json.Marshal([]any{m.GetUID(), m.GetLabels(), m.GetOwnerReferences(), m.GetDeletionTimestamp() != nil, extra})
		if err != nil {
			t.Fatal(err)
		}
		out[key] = string(b)
	}
	for _, p := range listPods(t, c, ns, job) {
		add("pod/"+p.Name, &p, nil)
	}
	for _, s := range listServices(t, c, ns, job) {
		add("service/"+s.Name, &s, nil)
	}
	secrets, err := c.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		data, _ := json.Marshal(s.Data)
		add("secret/"+s.Name, &s, fmt.Sprintf("%x", sha256.Sum256(data)))
	}
	return out
}

// A second workflow whose step names a running job's job-name neither
// adopts, reads nor deletes anything of it: not while the job's step runs,
// and not after that step ended Transient (a replica unschedulable past
// --pending-timeout) and left every object behind. A retry of the job's
// own step (another pod of the same workflow node) re-attaches to the same
// replicas and finishes the job. A step cannot claim a workflow it does not
// run in.
func TestAJobBelongsToItsWorkflowStepNotToItsName(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	c.InstallArgoCRDs(t)
	applyDeploy(t, c, ns, true)
	victim, attacker := newWorkflow(t, c, ns, "team-a-train"), newWorkflow(t, c, ns, "team-b-sweep")
	// The worker waits for a node pool that comes only later.
	pool := map[string]string{"trainstep.dev/test-pool": ns}
	file := writeFile(t, newJob("shared", v1alpha1.FrameworkPyTorch).replicas(master, 1, nil).replicas(worker, 1, nil).
		with(func(j *v1alpha1.TrainJob) {
			j.Spec.ReplicaSpecs[worker].Template.Spec.NodeSelector = pool
			// The step that gives up on the pool keeps what runs for its retry.
			j.Spec.RunPolicy.CleanPodPolicy = ptr.To(v1alpha1.CleanPodPolicyNone)
		}).yaml(t))

	first := startBinary(t, append(stepOf(t, c, ns, victim, "team-a-train.train", "team-a-train-1").args(file, ns), "--pending-timeout", "20s")...)
	testutil.Eventually(t, time.Minute, "the job's pods and the progress endpoint's Secrets", func() bool {
		return len(listPods(t, c, ns, "shared")) == 2 && len(snapshot(t, c, ns, "shared")) >= 6 // 2 pods, 2 Services, 2 Secrets
	})
	before := snapshot(t, c, ns, "shared")

	intruder := stepOf(t, c, ns, attacker, "team-b-sweep.trial(3:0.1).train", "team-b-sweep-1")
	takeOver := func(when string) {
		t.Helper()
		p := startBinary(t, intruder.args(file, ns)...)
		if code := p.wait(t, 2*time.Minute); code != 11 {
			t.Fatalf("%s: the other workflow's run exited %d, want 11 (Invalid); stderr:\n%s", when, code, p.stderr.String())
		}
		if out := p.stdout.String(); !strings.Contains(out, result.ReasonNotOwned) || !strings.Contains(out, "pod shared-master-0") {
			t.Errorf("%s: result %s, want %s naming pod shared-master-0", when, out, result.ReasonNotOwned)
		}
		if diff := cmpSnapshots(before, snapshot(t, c, ns, "shared")); diff != "" {
			t.Errorf("%s: the job's objects changed:\n%s", when, diff)
		}
	}
	takeOver("while the job's step runs")

	// The job's step ends Transient, its worker unschedulable: it leaves
	// everything to its retry, and gives its Lease up.
	if code := first.wait(t, time.Minute); code != 12 || !strings.Contains(first.stdout.String(), result.ReasonPendingTimeout) {
		t.Fatalf("the job's step exited %d (%s), want 12 PendingTimeout", code, first.stdout.String())
	}
	takeOver("after the job's step ended Transient")

	// A step pod of another workflow cannot present the job's workflow.
	forged := intruder
	forged.workflow = victim
	p := startBinary(t, forged.args(file, ns)...)
	if code := p.wait(t, time.Minute); code != 11 || !strings.Contains(p.stdout.String(), "belongs to workflow team-b-sweep") {
		t.Errorf("a step claiming another workflow exited %d: %s", code, p.stdout.String())
	}
	// Nor can credentials not bound to a step pod.
	byHand := intruder
	byHand.workflow, byHand.kubeconfig = victim, c.Kubeconfig
	p = startBinary(t, byHand.args(file, ns)...)
	if code := p.wait(t, time.Minute); code != 11 || !strings.Contains(p.stdout.String(), "not bound to a pod") {
		t.Errorf("a run by hand claiming a workflow exited %d: %s", code, p.stdout.String())
	}
	if diff := cmpSnapshots(before, snapshot(t, c, ns, "shared")); diff != "" {
		t.Errorf("after the forged runs, the job's objects changed:\n%s", diff)
	}

	// The pool comes, and Argo retries the job's own step: it re-attaches and finishes.
	if err := c.AddNode(context.Background(), "pool-"+ns[len(ns)-5:], cluster.NodeCapacity("8", "32Gi", 110, 0), cluster.WithNodeLabels(pool)); err != nil {
		t.Fatal(err)
	}
	retry := startBinary(t, stepOf(t, c, ns, victim, "team-a-train.train(1)", "team-a-train-2").args(file, ns)...)
	testutil.Eventually(t, time.Minute, "the retried step to re-attach and the worker to run", func() bool {
		running := 0
		for _, p := range listPods(t, c, ns, "shared") {
			if ref := metav1.GetControllerOf(&p); ref == nil || ref.Name != "team-a-train-2" {
				return false
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 2
	})
	for name, pod := range livePods(t, c, ns, "shared") {
		if !strings.HasPrefix(before["pod/"+name], `["`+string(pod.UID)+`"`) {
			t.Errorf("pod %s is a new instance (%s), want the one the first attempt made", name, pod.UID)
		}
	}
	for _, pod := range []string{"shared-master-0", "shared-worker-0"} {
		patchAnnotations(t, c, ns, pod, map[string]string{exitAfter: "0s", exitCode: "0"})
	}
	if code := retry.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("the retried step exited %d, want 0; stderr:\n%s", code, retry.stderr.String())
	}
	if want := executor.WorkflowIdentity(string(victim.GetUID()), "team-a-train.train"); !strings.Contains(retry.stderr.String(), want) {
		t.Errorf("the retried step's log does not name the job's identity %s", want)
	}
}

// cmpSnapshots says what differs between two snapshots.
func cmpSnapshots(before, after map[string]string) string {
	var out []string
	for k, v := range before {
		if after[k] != v {
			out = append(out, fmt.Sprintf("%s: %s -> %s", k, v, after[k]))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			out = append(out, fmt.Sprintf("%s: new %s", k, v))
		}
	}
	return strings.Join(out, "\n")
}

// Objects someone else labelled with a job's name (a pod and a Service
// that are no replica of it) are refused by name, before anything is
// created, and left as they were.
func TestObjectsPlantedWithAJobsLabelsAreRefusedByName(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	labels := map[string]string{v1alpha1.LabelJobName: "planted"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "planted-lookalike", Labels: labels},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels}}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sniffer", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/sniff:1"}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, c, ns, "planted")
	out := runJob(t, c, ns, newJob("planted", v1alpha1.FrameworkPyTorch).replicas(master, 1, nil).yaml(t))
	if out.res.Phase != result.PhaseInvalid || out.res.Reason != result.ReasonNotOwned ||
		!strings.Contains(out.res.Message, "pod sniffer") || !strings.Contains(out.res.Message, "service planted-lookalike") {
		t.Fatalf("%s/%s %q, want Invalid %s naming pod sniffer and service planted-lookalike", out.res.Phase, out.res.Reason, out.res.Message, result.ReasonNotOwned)
	}
	if diff := cmpSnapshots(before, snapshot(t, c, ns, "planted")); diff != "" {
		t.Errorf("the planted objects changed, or the run created some:\n%s", diff)
	}
}
