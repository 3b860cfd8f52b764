package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

// realNodeStartTimeout covers the control plane, containerd, the kubelet's registration and
// building podcheck on two busy cores.
const realNodeStartTimeout = 5 * time.Minute

// startRealNodeCluster starts a cluster of its own with the real node (and Argo with
// withArgo) and podcheck's image, and stops it when the test ends, checking then that
// nothing of the node is left.
func startRealNodeCluster(t *testing.T, withArgo ...bool) *cluster.Cluster {
	t.Helper()
	argo := len(withArgo) > 0 && withArgo[0]
	return startRealNodesCluster(t, cluster.Options{RealNode: true, Argo: argo})
}

// startRealNodesCluster is startRealNodeCluster with the cluster's options given (BinDir is
// filled in): it checks that nothing of any real node is left.
func startRealNodesCluster(t *testing.T, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	opts.BinDir = cluster.RequireRealNode(t)
	if opts.Argo {
		opts.BinDir = cluster.RequireArgo(t)
	}
	before := readMachineState(t)
	ctx, cancel := context.WithTimeout(context.Background(), realNodeStartTimeout)
	defer cancel()
	started := time.Now()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting a cluster with a real node: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("real-node cluster component logs:\n%s", c.LogTails(40))
		}
		nodes := c.RealNodes()
		c.Stop()
		checkNothingLeft(t, c, nodes, before)
	})
	t.Logf("cluster with a real node ready in %s (%s)", time.Since(started).Round(10*time.Millisecond), c.StartupSummary())
	if err := c.ImportGoImage(ctx, cluster.PodcheckImage, cluster.PodcheckPackage); err != nil {
		t.Fatal(err)
	}
	return c
}

// runToEnd creates the pod, waits until it has finished and returns it with its log, read
// through the API server (which fetches it from the kubelet).
func runToEnd(t *testing.T, c *cluster.Cluster, ns string, pod *corev1.Pod) (*corev1.Pod, string) {
	t.Helper()
	created := createPod(t, c, ns, pod)
	seen := watchPod(t, c, created, finished)
	last := seen[len(seen)-1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log, err := c.Client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the log of pod %s: %v", pod.Name, err)
	}
	return last, string(log)
}

func TestRealNodeRunsPod(t *testing.T) {
	c := startRealNodeCluster(t)

	pod, log := runToEnd(t, c, metav1.NamespaceDefault, cluster.PodcheckPod("podcheck"))

	if pod.Spec.NodeName != cluster.RealNodeName {
		t.Errorf("pod ran on node %q, want the real node %q", pod.Spec.NodeName, cluster.RealNodeName)
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod phase %s, want Succeeded; log:\n%s", pod.Status.Phase, log)
	}
	if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("container statuses %+v, want one terminated container", pod.Status.ContainerStatuses)
	}
	terminated := pod.Status.ContainerStatuses[0].State.Terminated
	if terminated.ExitCode != 0 || terminated.Reason != "Completed" {
		t.Errorf("container terminated with code %d, reason %q; want 0, Completed", terminated.ExitCode, terminated.Reason)
	}
	if !strings.HasPrefix(pod.Status.PodIP, "10.245.0.") {
		t.Errorf("pod IP %q, want one of the real node's pod network 10.245.0.0/24", pod.Status.PodIP)
	}
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != 2 || lines[0] != "podcheck: pod default/podcheck on node real-node" ||
		!strings.HasPrefix(lines[1], "podcheck: service-account token of ") {
		t.Errorf("log:\n%s\nwant the pod's identity from the downward API and its service-account token", log)
	}
}

func readMachineState(t *testing.T) cluster.MachineState {
	t.Helper()
	s, err := cluster.ReadMachineState()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkNothingLeft checks what a stopped cluster's real nodes (read before Stop) must have
// removed or put back, and that the machine is as before.
func checkNothingLeft(t *testing.T, c *cluster.Cluster, nodes []cluster.RealNodeInfo, before cluster.MachineState) {
	t.Helper()
	if err := cluster.LeftAfterStop(c.Dir, nodes, before); err != nil {
		t.Error(err)
	}
}

// mountsUnder lists this process's mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	mounts, err := cluster.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return mounts
}

// processesMentioning lists running processes whose command line mentions s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	procs, err := cluster.ProcessesMentioning(s)
	if err != nil {
		t.Fatal(err)
	}
	return procs
}

func TestRealNodeServices(t *testing.T) {
	c := startRealNodeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := metav1.NamespaceDefault

	// A replica the way trainstep renders one: hostname and subdomain under a job-wide
	// headless Service (MPI style), and a headless Service of its own named like the pod
	// (Training Operator style).
	worker := cluster.PodcheckPod("demo-worker-0", "-listen", "2222")
	worker.Labels = map[string]string{"job": "demo", "replica": "demo-worker-0"}
	worker.Spec.Hostname, worker.Spec.Subdomain = "demo-worker-0", "demo"
	for name, selector := range map[string]map[string]string{"demo": {"job": "demo"}, "demo-worker-0": {"replica": "demo-worker-0"}} {
		_, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone,
				Selector:  selector,
				Ports:     []corev1.ServicePort{{Name: "podcheck", Port: 2222}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating Service %s: %v", name, err)
		}
	}
	seen := watchPod(t, c, createPod(t, c, ns, worker), running)
	workerIP := seen[len(seen)-1].Status.PodIP

	client := cluster.PodcheckPod("client", "-api",
		"-resolve", "demo-worker-0.demo.default.svc.cluster.local",
		"-resolve", "demo-worker-0.demo.default.svc",
		"-resolve", "demo-worker-0",
		"-dial", "demo-worker-0.demo:2222",
		"-dial", "demo-worker-0:2222")
	pod, log := runToEnd(t, c, ns, client)
	t.Logf("client log:\n%s", log)
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("client pod phase %s, want Succeeded; log:\n%s", pod.Status.Phase, log)
	}
	version, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) < 2 {
		t.Fatalf("log:\n%s\nwant at least the pod's identity and token lines", log)
	}
	want := []string{
		// Through the kubernetes Service (kube-proxy) with the pod's CA and token.
		"podcheck: API server " + version.GitVersion,
		// Through the node's CoreDNS: the pod's full name, the short one, the replica's own
		// Service by the search path.
		"podcheck: demo-worker-0.demo.default.svc.cluster.local resolves to " + workerIP,
		"podcheck: demo-worker-0.demo.default.svc resolves to " + workerIP,
		"podcheck: demo-worker-0 resolves to " + workerIP,
		// Pod to pod over the bridge, by name.
		"podcheck: demo-worker-0.demo:2222 answers demo-worker-0",
		"podcheck: demo-worker-0:2222 answers demo-worker-0",
	}
	if diff := cmp.Diff(want, lines[2:]); diff != "" {
		t.Errorf("client log after its identity (-want +got):\n%s", diff)
	}
}

func TestRealNodeRunsArgoWorkflow(t *testing.T) {
	c := startRealNodeCluster(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := metav1.NamespaceDefault
	workflow := &unstructured.Unstructured{}
	err := yaml.Unmarshal([]byte(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: podcheck
spec:
  entrypoint: main
  templates:
  - name: main
    container:
      image: `+cluster.PodcheckImage+`
      imagePullPolicy: Never
      command: [/podcheck]
      args: [-api, -resolve, kubernetes.default.svc]
      env:
      - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
      - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
      - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
`), &workflow.Object)
	if err != nil {
		t.Fatal(err)
	}
	// The workflow pod runs as the namespace's default ServiceAccount.
	if err := c.AllowArgoExecutor(ctx, ns, "default"); err != nil {
		t.Fatal(err)
	}
	dynamicClient, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	workflows := dynamicClient.Resource(cluster.WorkflowResource).Namespace(ns)
	if _, err := workflows.Create(ctx, workflow, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Workflow: %v", err)
	}
	var phase, message string
	testutil.Eventually(t, 2*time.Minute, "the Workflow to finish", func() (bool, error) {
		wf, err := workflows.Get(ctx, "podcheck", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ = unstructured.NestedString(wf.Object, "status", "phase")
		message, _, _ = unstructured.NestedString(wf.Object, "status", "message")
		return phase == "Succeeded" || phase == "Failed" || phase == "Error", nil
	})
	if phase != "Succeeded" {
		t.Fatalf("Workflow phase %s (%s), want Succeeded", phase, message)
	}
	// Argo names a single-step workflow's pod after the workflow; its init and wait
	// containers are argoexec, main runs podcheck through argoexec's emissary.
	pod := getPod(t, c, ns, "podcheck")
	var containers []string
	for _, ctr := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		containers = append(containers, ctr.Name+"="+ctr.Image)
	}
	wantContainers := []string{"init=" + cluster.ArgoExecutorImage, "wait=" + cluster.ArgoExecutorImage, "main=" + cluster.PodcheckImage}
	if diff := cmp.Diff(wantContainers, containers); diff != "" {
		t.Errorf("workflow pod containers (-want +got):\n%s", diff)
	}
	log, err := c.Client.CoreV1().Pods(ns).GetLogs("podcheck", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the main container's log: %v", err)
	}
	version, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	want := []string{
		"podcheck: pod default/podcheck on node real-node",
		"podcheck: API server " + version.GitVersion,
		"podcheck: kubernetes.default.svc resolves to 10.96.0.1",
	}
	// argoexec's emissary, the main container's first process, logs after podcheck.
	if len(lines) < 4 || !strings.HasPrefix(lines[1], "podcheck: service-account token of ") ||
		cmp.Diff(want, []string{lines[0], lines[2], lines[3]}) != "" {
		t.Errorf("main container log:\n%s\nwant:\n%s", log, strings.Join(want, "\n"))
	}
}

// killedOwnerEnv makes TestRealNodeKilledOwner run: it is the helper process of
// TestRealNodeLeftoversAreSwept.
const killedOwnerEnv = "TRAINSTEP_KILLED_OWNER"

func TestRealNodeLeftoversAreSwept(t *testing.T) {
	cluster.RequireRealNode(t)
	before := readMachineState(t)
	// Another test process starts a real node with a running pod and is killed outright:
	// no Stop runs, its kubelet and containerd die with it, its pod's container does not.
	helper := exec.Command(os.Args[0], "-test.run=^TestRealNodeKilledOwner$", "-test.v", "-test.count=1")
	helper.Env = append(os.Environ(), killedOwnerEnv+"=1")
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = helper.Process.Kill(); _ = helper.Wait() }()
	var namespace, dir string
	found := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if fields := strings.Fields(scanner.Text()); len(fields) == 3 && fields[0] == "LEFTOVER" {
				namespace, dir = fields[1], fields[2]
				close(found)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-found:
	case <-time.After(realNodeStartTimeout):
		t.Fatal("the helper process did not start its real node in time")
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	if _, err := os.Stat("/run/netns/" + namespace); err != nil {
		t.Fatalf("the killed process's namespace %s is gone before the sweep (%v): nothing to test", namespace, err)
	}
	if procs := processesMentioning(t, dir); len(procs) == 0 {
		t.Fatalf("no process of the killed process's node is left before the sweep: nothing to test")
	}

	swept, err := cluster.SweepRealNodes()
	if err != nil {
		t.Fatalf("sweeping: %v", err)
	}
	if !slices.Contains(swept, namespace) {
		t.Errorf("swept %v, want %s among them", swept, namespace)
	}
	if _, err := os.Stat("/run/netns/" + namespace); !os.IsNotExist(err) {
		t.Errorf("network namespace %s still exists after the sweep (stat: %v)", namespace, err)
	}
	if mounts := mountsUnder(t, dir); len(mounts) > 0 {
		t.Errorf("mounts left under the node's directory after the sweep: %v", mounts)
	}
	if procs := processesMentioning(t, dir); len(procs) > 0 {
		t.Errorf("processes of the node left after the sweep: %v", procs)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still exists after the sweep (stat: %v)", filepath.Dir(dir), err)
	}
	if diff := cmp.Diff(before, readMachineState(t)); diff != "" {
		t.Errorf("the machine differs after the sweep (-before +after):\n%s", diff)
	}
}

// TestRealNodeKilledOwner is TestRealNodeLeftoversAreSwept's helper process: it starts a
// real node with a running pod, says where, and waits to be killed.
func TestRealNodeKilledOwner(t *testing.T) {
	if os.Getenv(killedOwnerEnv) != "1" {
		t.Skip("the helper process of TestRealNodeLeftoversAreSwept")
	}
	ctx, cancel := context.WithTimeout(context.Background(), realNodeStartTimeout)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: cluster.RequireRealNode(t), RealNode: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ImportGoImage(ctx, cluster.PodcheckImage, cluster.PodcheckPackage); err != nil {
		t.Fatal(err)
	}
	watchPod(t, c, createPod(t, c, metav1.NamespaceDefault, cluster.PodcheckPod("left-running", "-listen", "2222")), running)
	node, _ := c.RealNode()
	fmt.Printf("LEFTOVER %s %s\n", node.Namespace, node.Dir)
	<-ctx.Done()
	t.Fatal("not killed in time")
}

// TestRealNodeDetachedStops checks make cluster-up REAL_NODE=1 / make cluster-down: a real
// node started detached, with a pod running, leaves nothing behind after StopDetached.
func TestRealNodeDetachedStops(t *testing.T) {
	binDir := cluster.RequireRealNode(t)
	before := readMachineState(t)
	ctx, cancel := context.WithTimeout(context.Background(), realNodeStartTimeout)
	defer cancel()
	stateFile := filepath.Join(t.TempDir(), "cluster-state.json")
	c, err := cluster.StartDetached(ctx, cluster.Options{BinDir: binDir, Dir: filepath.Join(t.TempDir(), "run"), RealNode: true}, stateFile)
	if err != nil {
		t.Fatalf("starting a detached cluster with a real node: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cluster.StopDetached(stateFile)
		}
	})
	node, _ := c.RealNode()
	if err := c.ImportGoImage(ctx, cluster.PodcheckImage, cluster.PodcheckPackage); err != nil {
		t.Fatal(err)
	}
	watchPod(t, c, createPod(t, c, metav1.NamespaceDefault, cluster.PodcheckPod("left-running", "-listen", "2222")), running)

	if err := cluster.StopDetached(stateFile); err != nil {
		t.Fatalf("stopping the detached cluster: %v", err)
	}
	stopped = true
	checkNothingLeft(t, c, []cluster.RealNodeInfo{node}, before)
}
