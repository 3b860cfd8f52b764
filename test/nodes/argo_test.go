package nodes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/test/cluster"
)

const (
	// localImage is `make image`'s archive as the nodes know it: they pull nothing, so the
	// test puts it in place of the shipped image (testutil.ShippedImage) in memory.
	localImage = "docker.io/local/trainstep:nodes"
	// allReduceJob is the shipped job of the demo trainer: a master (rank 0) and three
	// workers summing their gradients around a TCP ring.
	allReduceJob = "workflows/jobs/demo-allreduce.yaml"
	// allReduceClaim is the PersistentVolumeClaim that job checkpoints on.
	allReduceClaim = "demo-allreduce-checkpoints"
)

var clusterWorkflowTemplates = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "clusterworkflowtemplates"}

// allReduceWorkflow calls the shipped ClusterWorkflowTemplate as docs/argo.md's "from your own
// DAG" does, with the shipped job unchanged as its job parameter, the replicas' image as its
// image parameter, and its set parameter (one override per line) pinning rank 0 to real-node
// and the three other ranks to real-node-2, so that the ring crosses between the nodes, and
// keeping every rank's pod once the job ended (a worker still in its last step when rank 0
// ends is stopped otherwise), so that the test reads where each ran and its log.
const allReduceWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: allreduce-}
spec:
  entrypoint: main
  serviceAccountName: trainstep-executor
  templates:
    - name: main
      dag:
        tasks:
          - name: train
            templateRef: {name: trainstep, template: train, clusterScope: true}
            arguments:
              parameters:
                - {name: image, value: "` + localImage + `"}
                - name: job
                  value: %s
                - name: set
                  value: |
                    spec.replicaSpecs.Master.template.spec.nodeSelector={kubernetes.io/hostname: ` + cluster.RealNodeName + `}
                    spec.replicaSpecs.Worker.template.spec.nodeSelector={kubernetes.io/hostname: ` + secondNode + `}
                    spec.runPolicy.cleanPodPolicy=None
`

// TestRealNodesAllReduceWorkflowAcrossNodes runs the shipped all-reduce job through the
// shipped ClusterWorkflowTemplate under the real Argo controller, its rank 0 on real-node and
// its other ranks on real-node-2: the ranks find rank 0 by its name in the job's Service and
// each other around the ring across the nodes, train 150 synchronous steps, and the step's
// outputs say where each rank ran.
func TestRealNodesAllReduceWorkflowAcrossNodes(t *testing.T) {
	t.Parallel()
	c := twoNodes(t)
	bothNodesUp(t, c)
	root := repoRoot(t)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	started := time.Now()
	importTrainstepImage(ctx, t, c, root)
	applyClusterTemplate(ctx, t, dyn, root)
	t.Logf("trainstep image and ClusterWorkflowTemplate in place in %s", time.Since(started).Round(100*time.Millisecond))
	ns := c.Namespace(t)
	applyDeploy(ctx, t, c, root, ns)
	applyExamplesPolicy(ctx, t, c, root, ns)
	checkpointClaim(ctx, t, c, ns, allReduceClaim)

	job, err := json.Marshal(string(readFile(t, filepath.Join(root, allReduceJob))))
	if err != nil {
		t.Fatal(err)
	}
	wf := &unstructured.Unstructured{}
	if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf(allReduceWorkflow, job)), &wf.Object); err != nil {
		t.Fatal(err)
	}
	run := submitWorkflow(ctx, t, dyn, ns, wf)
	wf, phase := run.waitEnd(t, c, 5*time.Minute)
	train := trainOutputs(t, wf)
	if phase != "Succeeded" || train["phase"] != "Succeeded" {
		t.Fatalf("Workflow %s: phase %s, train step's outputs %v; want Succeeded; nodes: %s; %s", run.name, phase, train, nodeSummary(wf), podsOf(c, ns))
	}
	if train["restarts"] != "0" {
		t.Errorf("train output restarts = %s, want 0", train["restarts"])
	}
	var metrics struct {
		Loss  *float64 `json:"loss"`
		Steps int      `json:"steps"`
	}
	if err := json.Unmarshal([]byte(train["metrics"]), &metrics); err != nil || metrics.Loss == nil || metrics.Steps != 150 {
		t.Errorf("train output metrics = %s (%v), want rank 0's loss after the job's 150 steps", train["metrics"], err)
	}
	var replicas []struct{ Type, Phase, Node string }
	if err := json.Unmarshal([]byte(train["replicas"]), &replicas); err != nil || len(replicas) != 4 {
		t.Fatalf("train output replicas = %s (%v), want the master and three workers", train["replicas"], err)
	}
	want := map[string]string{"Master": cluster.RealNodeName, "Worker": secondNode}
	for _, r := range replicas {
		if r.Node != want[r.Type] {
			t.Errorf("replica %+v: want it on %s", r, want[r.Type])
		}
	}
	// The pods say the same, and each joined the ring; their logs come from the kubelet of
	// each node.
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + train["job-name"]})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]int{}
	for _, p := range pods.Items {
		nodes[p.Spec.NodeName]++
		log, err := c.Client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "pytorch"}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(log), "ring ready") {
			t.Errorf("pod %s on %s never joined the ring (%v):\n%s", p.Name, p.Spec.NodeName, err, lastLines(string(log), 10))
		}
	}
	if nodes[cluster.RealNodeName] != 1 || nodes[secondNode] != 3 {
		t.Errorf("the job's pods ran on %v, want rank 0 on %s and the three others on %s", nodes, cluster.RealNodeName, secondNode)
	}
}

// trainOutputs are the output parameters of the Workflow's train step.
func trainOutputs(t *testing.T, wf *unstructured.Unstructured) map[string]string {
	t.Helper()
	nodes, err := cluster.WorkflowNodes(wf)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes {
		// The template retries its step, so the task is a Retry node ("train") over its
		// attempts' Pod nodes ("train(0)", ...); the task's node carries the outputs.
		if n.DisplayName != "train" {
			continue
		}
		for _, p := range n.Outputs.Parameters {
			if p.Value != nil {
				out[p.Name] = *p.Value
			}
		}
	}
	return out
}

// trainstepImage is trainstep's image as `make image` builds it (hack/image), built in the
// background from the shared cluster's start on, while the tests that need no image run.
var trainstepImage struct {
	once    sync.Once
	done    chan struct{}
	archive string
	err     error
}

// buildTrainstepImage starts the image's build once.
func buildTrainstepImage(root string) {
	trainstepImage.once.Do(func() {
		trainstepImage.done = make(chan struct{})
		trainstepImage.archive = filepath.Join(os.TempDir(), fmt.Sprintf("trainstep-nodes-image-%d.tar", os.Getpid()))
		go func() {
			defer close(trainstepImage.done)
			build := exec.Command("nice", "go", "run", "./hack/image", "-o", trainstepImage.archive, "-tag", localImage, "-version", "nodes")
			build.Dir = root
			if out, err := build.CombinedOutput(); err != nil {
				trainstepImage.err = fmt.Errorf("building the trainstep image: %v\n%s", err, out)
			}
		}()
	})
}

// nodeSummary lists the Workflow's nodes with their type, phase and outputs, for failure
// messages.
func nodeSummary(wf *unstructured.Unstructured) string {
	if wf == nil {
		return ""
	}
	raw, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	var parts []string
	for _, v := range raw {
		n, _ := v.(map[string]any)
		parts = append(parts, fmt.Sprintf("%v (%v) %v %v outputs %v", n["displayName"], n["type"], n["phase"], n["message"], n["outputs"]))
	}
	return strings.Join(parts, "; ")
}

// importTrainstepImage waits for trainstep's image and imports it into both nodes.
func importTrainstepImage(ctx context.Context, t *testing.T, c *cluster.Cluster, root string) {
	t.Helper()
	buildTrainstepImage(root)
	select {
	case <-trainstepImage.done:
	case <-ctx.Done():
		t.Fatal("the trainstep image was not built in time")
	}
	if trainstepImage.err != nil {
		t.Fatal(trainstepImage.err)
	}
	if err := c.ImportImage(ctx, trainstepImage.archive); err != nil {
		t.Fatal(err)
	}
}

// applyClusterTemplate creates templates/clusterworkflowtemplate.yaml as shipped but for its
// image, replaced by localImage.
func applyClusterTemplate(ctx context.Context, t *testing.T, dyn dynamic.Interface, root string) {
	t.Helper()
	text := string(readFile(t, filepath.Join(root, "templates", "clusterworkflowtemplate.yaml")))
	shippedImage, err := testutil.ShippedImage(root)
	if err != nil {
		t.Fatal(err)
	}
	// Its train and cleanup templates.
	if n := strings.Count(text, shippedImage); n != 2 {
		t.Fatalf("templates/clusterworkflowtemplate.yaml names %s %d times, want twice: update the test", shippedImage, n)
	}
	cwt := &unstructured.Unstructured{}
	if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(text, shippedImage, localImage)), &cwt.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(clusterWorkflowTemplates).Create(ctx, cwt, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("applying templates/clusterworkflowtemplate.yaml: %v", err)
	}
}

// applyDeploy creates what deploy/kustomization.yaml lists in ns, as `kubectl apply -k
// deploy/ -n <ns>` does.
func applyDeploy(ctx context.Context, t *testing.T, c *cluster.Cluster, root, ns string) {
	t.Helper()
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(root, "deploy", "kustomization.yaml")), &kustomization); err != nil {
		t.Fatal(err)
	}
	for _, file := range kustomization.Resources {
		data := readFile(t, filepath.Join(root, "deploy", file))
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(data, &meta); err != nil {
			t.Fatalf("reading deploy/%s: %v", file, err)
		}
		var err error
		switch meta.Kind {
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			if err = yaml.UnmarshalStrict(data, &sa); err == nil {
				_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{})
			}
		case "Role":
			var role rbacv1.Role
			if err = yaml.UnmarshalStrict(data, &role); err == nil {
				_, err = c.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{})
			}
		case "RoleBinding":
			var binding rbacv1.RoleBinding
			if err = yaml.UnmarshalStrict(data, &binding); err == nil {
				_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{})
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err = yaml.UnmarshalStrict(data, &cm); err == nil {
				_, err = c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &cm, metav1.CreateOptions{})
			}
		default:
			t.Fatalf("deploy/%s: kind %q: teach applyDeploy to create it", file, meta.Kind)
		}
		if err != nil {
			t.Fatalf("applying deploy/%s: %v", file, err)
		}
	}
}

// applyExamplesPolicy replaces the namespace's settings with workflows/policy.yaml's, as
// workflows/README.md says: the examples' claim allowed.
func applyExamplesPolicy(ctx context.Context, t *testing.T, c *cluster.Cluster, root, ns string) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(readFile(t, filepath.Join(root, "workflows", "policy.yaml")), &cm); err != nil {
		t.Fatal(err)
	}
	cm.Namespace = ns
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Update(ctx, &cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("applying workflows/policy.yaml: %v", err)
	}
}

// checkpointClaim creates the PersistentVolumeClaim claim in ns, bound to a PersistentVolume
// of its own: a directory of this machine, the disk both nodes share, writable by every user
// (the replicas run as the image's user). Both go when the test ends.
func checkpointClaim(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, claim string) {
	t.Helper()
	dir := filepath.Join("/var/tmp", "trainstep-nodes-"+ns+"-"+claim)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PersistentVolume %s: %v", pv.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	})
	noClass := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
			StorageClassName: &noClass,
			VolumeName:       pv.Name,
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PersistentVolumeClaim %s: %v", claim, err)
	}
}

// podsOf lists ns's pods with their phase and node, for failure messages.
func podsOf(c *cluster.Cluster, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "listing pods: " + err.Error()
	}
	var parts []string
	for _, p := range pods.Items {
		parts = append(parts, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
	}
	return "pods: " + strings.Join(parts, ", ")
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// repoRoot is the repository's root: two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// submittedWorkflow is a Workflow the test submitted.
type submittedWorkflow struct {
	workflows dynamic.ResourceInterface
	name, ns  string
}

// submitWorkflow creates wf in ns.
func submitWorkflow(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string, wf *unstructured.Unstructured) submittedWorkflow {
	t.Helper()
	workflows := dyn.Resource(cluster.WorkflowResource).Namespace(ns)
	created, err := workflows.Create(ctx, wf, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("submitting the Workflow: %v", err)
	}
	return submittedWorkflow{workflows: workflows, name: created.GetName(), ns: ns}
}

// waitEnd waits until the Workflow ended, its train step's outputs in when it succeeded, and
// returns it with its phase.
func (w submittedWorkflow) waitEnd(t *testing.T, c *cluster.Cluster, within time.Duration) (*unstructured.Unstructured, string) {
	t.Helper()
	started := time.Now()
	var wf *unstructured.Unstructured
	var phase string
	testutil.Eventually(t, within, "the Workflow to end", func(ctx context.Context) (bool, error) {
		var err error
		if wf, err = w.workflows.Get(ctx, w.name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		phase, _, _ = unstructured.NestedString(wf.Object, "status", "phase")
		// The step's outputs reach its node through a WorkflowTaskResult, which the
		// controller may take in after the Workflow's phase (no task here reads them).
		_, reported := trainOutputs(t, wf)["phase"]
		return phase == "Failed" || phase == "Error" || phase == "Succeeded" && reported, nil
	}, func() string { return "phase " + phase + "; nodes: " + nodeSummary(wf) + "; " + podsOf(c, w.ns) })
	t.Logf("Workflow %s ended %s in %s", w.name, phase, time.Since(started).Round(100*time.Millisecond))
	return wf, phase
}

// followLogOnFailure streams container's log of pod from now on and prints it
// if the test fails: a pod that a drain removes takes its log with it.
func followLogOnFailure(t *testing.T, c *cluster.Cluster, ns, pod, container string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var buf strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		stream, err := c.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
		if err != nil {
			mu.Lock()
			fmt.Fprintf(&buf, "(following the log: %v)", err)
			mu.Unlock()
			return
		}
		defer stream.Close()
		chunk := make([]byte, 32<<10)
		for {
			n, err := stream.Read(chunk)
			mu.Lock()
			buf.Write(chunk[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("log of %s/%s (%s):\n%s", ns, pod, container, buf.String())
		}
	})
}
