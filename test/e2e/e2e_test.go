// Package e2e_test runs trainstep as users do, end to end: the image `make image` builds,
// deploy/ and templates/ applied as shipped, and the workflows of workflows/ (and the
// calls of the templates in docs/argo.md) submitted to the real Argo workflow controller, whose
// steps and replicas run as containers on the test cluster's real node. The package's
// tests share one such cluster, each in a namespace of its own that enforces PodSecurity
// `restricted`, as docs/security.md recommends, and run in parallel: most of their time is
// spent waiting on the controllers. They need the real node and Argo: `make test` runs them
// (as root); without TRAINSTEP_REAL_NODE=1 they skip, and under CI=true they fail instead.
//
// The tests read the repository's files and must not modify them: what they change to run
// here (image references, where pods run) they change in memory and say so.
package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/test/cluster"
)

const (
	// localImage is `make image`'s archive imported under a tag that is not :latest (pods
	// then default to IfNotPresent); the tests name it instead of shippedImage.
	localImage = "docker.io/local/trainstep:e2e"
	// shippedPython is the image of the examples' script steps. The tests run those scripts
	// with this machine's python3 in an image of its own, pythonImage.
	shippedPython = "python:3.12-alpine"
	pythonImage   = "docker.io/local/python:host"
	// realNodeName is the real node's name; workflows are pinned to it.
	realNodeName = "real-node"
	// jobNameLabel is on every object trainstep creates for a job.
	jobNameLabel = "trainstep.dev/job-name"
	// jobNameEnv is in the environment of every replica's main container: its job's name.
	jobNameEnv = "TRAINSTEP_JOB_NAME"
)

// shippedImage is the trainstep image templates/ and workflows/ name, by tag and digest.
// The real node pulls nothing, so the tests replace it with localImage.
var shippedImage = func() string {
	image, err := testutil.ShippedImage("../..")
	if err != nil {
		panic(err)
	}
	return image
}()

// restrictedPod and restrictedContainer are what PodSecurity `restricted` asks of a pod and of
// each of its containers, in YAML flow style, for the tests' own job manifests. The user is a
// number: the images built from this machine's files have no user of their own, so root.
const (
	restrictedPod       = `{runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}`
	restrictedContainer = `{allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}`
)

// restricted sets what PodSecurity `restricted` asks of a pod the test creates itself
// (restrictedPod and restrictedContainer).
func restricted(spec *corev1.PodSpec) {
	nonRoot, user, escalate := true, int64(65532), false
	spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot, RunAsUser: &user,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	for i := range spec.Containers {
		spec.Containers[i].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &escalate,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	}
}

var (
	clusterWorkflowTemplateResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "clusterworkflowtemplates"}
	workflowTemplateResource        = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflowtemplates"}
	// trainingLine is a step line of the demo trainer's log.
	trainingLine = regexp.MustCompile(`(?m)step \d+ loss \S+$`)
)

// shared is the package's one cluster with the real node and Argo, started by the first
// test that needs it and stopped by TestMain: trainstep's image and the examples' script
// image imported, and the ClusterWorkflowTemplate of templates/ installed.
var shared struct {
	once    sync.Once
	c       *cluster.Cluster
	dynamic dynamic.Interface
	err     error
}

// TestMain stops the shared cluster after the tests, also when `go test` is interrupted (a
// killed one relies on the cluster's Pdeathsig and its sweep of leftover real nodes).
func TestMain(m *testing.M) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "%s: stopping the test cluster; tests still running will fail\n", sig)
		if shared.c != nil {
			shared.c.Stop()
		}
		os.Exit(1)
	}()
	code := m.Run()
	if shared.c != nil {
		shared.c.Stop()
	}
	os.Exit(code)
}

// e2e is the shared cluster seen from one test: a namespace of the test's own holding
// deploy/ and templates/workflowtemplate.yaml.
type e2e struct {
	c         *cluster.Cluster
	dynamic   dynamic.Interface
	namespace string
}

// setUp hands the test the shared cluster, starting it on first use, and a namespace of
// its own that enforces PodSecurity `restricted` (enforceRestricted), with deploy/ and
// templates/ applied as docs/argo.md says: every pod of the test — the steps, Argo's
// containers, the replicas and the test's own — must pass the profile, and every write of
// the steps the shipped admission policy (applyAdmissionPolicy), with deploy/'s settings. When the test fails,
// its output ends with the namespace's pods and the end of every component's log.
func setUp(t *testing.T) *e2e {
	t.Helper()
	binDir := cluster.RequireArgo(t)
	shared.once.Do(func() { shared.err = startShared(t, binDir) })
	if shared.err != nil {
		t.Fatalf("the shared cluster: %v", shared.err)
	}
	e := &e2e{c: shared.c, dynamic: shared.dynamic}
	e.namespace = e.c.Namespace(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s\ncomponent logs:\n%s", e.podSummary(t), e.c.LogTails(40))
		}
	})
	e.c.EnforceRestricted(t, e.namespace)
	root := repoRoot(t)
	e.applyDeploy(t, root)
	e.applyTemplate(t, root)
	return e
}

// startShared builds trainstep's image (what `make image IMAGE=<localImage>` runs), starts
// the cluster, imports the images and applies templates/clusterworkflowtemplate.yaml as
// shipped (`kubectl apply -f`), but for its image, replaced with localImage.
func startShared(t *testing.T, binDir string) error {
	root := repoRoot(t)
	archive := filepath.Join(os.TempDir(), fmt.Sprintf("trainstep-e2e-image-%d.tar", os.Getpid()))
	defer os.Remove(archive)
	started := time.Now()
	build := exec.Command("go", "run", "./hack/image", "-o", archive, "-tag", localImage, "-version", "e2e")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the trainstep image: %v\n%s", err, out)
	}
	t.Logf("trainstep image built in %s", time.Since(started).Round(100*time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	started = time.Now()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, RealNode: true, Argo: true})
	if err != nil {
		return fmt.Errorf("starting a cluster with the real node and Argo: %w", err)
	}
	shared.c = c
	t.Logf("cluster ready in %s (%s)", time.Since(started).Round(10*time.Millisecond), c.StartupSummary())
	if shared.dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		return err
	}
	if err := c.ImportImage(ctx, archive); err != nil {
		return err
	}
	if err := importPythonImage(ctx, c); err != nil {
		return err
	}
	if err := applyAdmissionPolicy(ctx, c, root); err != nil {
		return err
	}
	var cwt unstructured.Unstructured
	path := filepath.Join(root, "templates", "clusterworkflowtemplate.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// The step's image is the template's own, no parameter: the test's replaces it.
	data = []byte(replaceTimes(t, "templates/clusterworkflowtemplate.yaml", string(data), shippedImage, localImage, templateImages))
	if err := yaml.UnmarshalStrict(data, &cwt.Object); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if _, err := shared.dynamic.Resource(clusterWorkflowTemplateResource).Create(ctx, &cwt, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("applying templates/clusterworkflowtemplate.yaml: %w", err)
	}
	return nil
}

// importPythonImage packs this machine's python3, its standard library and the libraries
// it loads into pythonImage.
func importPythonImage(ctx context.Context, c *cluster.Cluster) error {
	python, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		return fmt.Errorf("the examples' script steps need this machine's python3: %w", err)
	}
	stdlib := "/usr/lib/" + filepath.Base(python)
	files := map[string]string{"/usr/bin/python": python, stdlib: stdlib}
	libs, err := sharedLibraries(python)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		files[lib] = lib
	}
	return c.ImportHostFilesImage(ctx, pythonImage, files)
}

// sharedLibraries lists the shared libraries a program of this machine loads (ldd), the
// dynamic loader included.
func sharedLibraries(program string) ([]string, error) { return cluster.SharedLibraries(program) }

// applyDeploy creates what deploy/kustomization.yaml lists, as the files say: what
// `kubectl apply -k deploy/ -n <namespace>` does.
func (e *e2e) applyDeploy(t *testing.T, root string) {
	t.Helper()
	e.applyKustomization(t, filepath.Join(root, "deploy"))
}

// applySecretsAddition applies deploy/secrets/ as docs/argo.md tells a namespace that runs
// MPI jobs or wants the progress endpoint (`kubectl apply -k deploy/secrets/ -n
// <namespace>`): the step's rights on Secrets, which deploy/ alone does not grant.
func (e *e2e) applySecretsAddition(t *testing.T) {
	t.Helper()
	e.applyKustomization(t, filepath.Join(repoRoot(t), "deploy", "secrets"))
}

// applyKustomization creates the objects dir/kustomization.yaml lists, in the test's
// namespace.
func (e *e2e) applyKustomization(t *testing.T, dir string) {
	t.Helper()
	var kustomization struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &kustomization)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, file := range kustomization.Resources {
		path := filepath.Join(dir, file)
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(readFile(t, path), &meta); err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		var err error
		switch meta.Kind {
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			readYAML(t, path, &sa)
			_, err = e.c.Client.CoreV1().ServiceAccounts(e.namespace).Create(ctx, &sa, metav1.CreateOptions{})
		case "Role":
			var role rbacv1.Role
			readYAML(t, path, &role)
			_, err = e.c.Client.RbacV1().Roles(e.namespace).Create(ctx, &role, metav1.CreateOptions{})
		case "RoleBinding":
			var binding rbacv1.RoleBinding
			readYAML(t, path, &binding)
			_, err = e.c.Client.RbacV1().RoleBindings(e.namespace).Create(ctx, &binding, metav1.CreateOptions{})
		case "ConfigMap":
			var cm corev1.ConfigMap
			readYAML(t, path, &cm)
			_, err = e.c.Client.CoreV1().ConfigMaps(e.namespace).Create(ctx, &cm, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: kind %q: teach applyKustomization to create it", path, meta.Kind)
		}
		if err != nil {
			t.Fatalf("applying %s: %v", path, err)
		}
	}
}

// applyTemplate creates the WorkflowTemplate of templates/workflowtemplate.yaml, its
// trainstep image replaced by localImage.
func (e *e2e) applyTemplate(t *testing.T, root string) {
	t.Helper()
	text := replaceTimes(t, "templates/workflowtemplate.yaml", string(readFile(t, filepath.Join(root, "templates", "workflowtemplate.yaml"))), shippedImage, localImage, templateImages)
	tmpl := &unstructured.Unstructured{}
	if err := yaml.UnmarshalStrict([]byte(text), &tmpl.Object); err != nil {
		t.Fatalf("reading templates/workflowtemplate.yaml: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.dynamic.Resource(workflowTemplateResource).Namespace(e.namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("applying templates/workflowtemplate.yaml: %v", err)
	}
}

// loadWorkflow reads a Workflow of workflows/ with the image references replaced (see
// shippedImage and shippedPython) and every pod of its own pinned to the real node
// (spec.nodeSelector, which Argo gives each step pod).
func loadWorkflow(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	text := string(readFile(t, filepath.Join(repoRoot(t), path)))
	for _, r := range [][2]string{{shippedImage, localImage}, {shippedPython, pythonImage}} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("%s does not name %s any more: update the test", path, r[0])
		}
		text = strings.ReplaceAll(text, r[0], r[1])
	}
	wf := &unstructured.Unstructured{}
	if err := yaml.UnmarshalStrict([]byte(text), &wf.Object); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	pinToRealNode(t, wf)
	return wf
}

// pinToRealNode sets the Workflow's spec.nodeSelector, which Argo gives each of its pods, to
// the real node.
func pinToRealNode(t *testing.T, wf *unstructured.Unstructured) {
	t.Helper()
	if err := unstructured.SetNestedStringMap(wf.Object, map[string]string{corev1.LabelHostname: realNodeName}, "spec", "nodeSelector"); err != nil {
		t.Fatal(err)
	}
}

// replaceOnce replaces the one occurrence of old in text.
func replaceOnce(t *testing.T, what, text, old, replacement string) string {
	t.Helper()
	return replaceTimes(t, what, text, old, replacement, 1)
}

// replaceTimes replaces old, which text must hold times times.
func replaceTimes(t *testing.T, what, text, old, replacement string, times int) string {
	t.Helper()
	if n := strings.Count(text, old); n != times {
		t.Fatalf("%s names %s %d times, want %d: update the test", what, old, n, times)
	}
	return strings.ReplaceAll(text, old, replacement)
}

// templateImages is how many times each template file names the trainstep
// image: its train and cleanup templates.
const templateImages = 2

// submit creates the Workflow and returns its name.
func (e *e2e) submit(t *testing.T, wf *unstructured.Unstructured) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created, err := e.workflows().Create(ctx, wf, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("submitting the Workflow: %v", err)
	}
	return created.GetName()
}

func (e *e2e) workflows() dynamic.ResourceInterface {
	return e.dynamic.Resource(cluster.WorkflowResource).Namespace(e.namespace)
}

// waitForWorkflow waits until the Workflow's phase is one of phases and returns it.
func (e *e2e) waitForWorkflow(t *testing.T, name string, timeout time.Duration, phases ...string) *unstructured.Unstructured {
	t.Helper()
	var wf *unstructured.Unstructured
	var phase string
	testutil.Eventually(t, timeout, "Workflow "+name+" to reach "+strings.Join(phases, " or "), func(ctx context.Context) (bool, error) {
		var err error
		if wf, err = e.workflows().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		phase, _, _ = unstructured.NestedString(wf.Object, "status", "phase")
		for _, p := range phases {
			if phase == p {
				return true, nil
			}
		}
		return false, nil
	}, func() string { return "last phase " + phase + "; nodes:\n" + nodeSummary(wf) + e.podSummary(t) })
	return wf
}

// workflowNode and parameter are the parts of a Workflow's status the tests read.
type (
	workflowNode = cluster.WorkflowNode
	parameter    = cluster.WorkflowParameter
)

// nodes decodes the Workflow's status.nodes.
func nodes(t *testing.T, wf *unstructured.Unstructured) map[string]workflowNode {
	t.Helper()
	out, err := cluster.WorkflowNodes(wf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// podNode is the Pod node of the task or step displayed as name (a retried template's
// last attempt).
func podNode(t *testing.T, wf *unstructured.Unstructured, name string) workflowNode {
	t.Helper()
	var found *workflowNode
	for _, n := range nodes(t, wf) {
		if n.Type == "Pod" && (n.DisplayName == name || strings.HasPrefix(n.DisplayName, name+"(")) {
			if found == nil || n.DisplayName > found.DisplayName {
				found = &n
			}
		}
	}
	if found == nil {
		t.Fatalf("Workflow %s has no pod node %s; nodes:\n%s", wf.GetName(), name, nodeSummary(wf))
	}
	return *found
}

func nodeSummary(wf *unstructured.Unstructured) string {
	if wf == nil {
		return ""
	}
	raw, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	var b strings.Builder
	for _, v := range raw {
		n, _ := v.(map[string]any)
		fmt.Fprintf(&b, "  %v (%v, %v) %v %v\n", n["displayName"], n["type"], n["templateName"], n["phase"], n["message"])
	}
	return b.String()
}

// podSummary lists the namespace's pods with their phase and node, for failure messages.
func (e *e2e) podSummary(t *testing.T) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := e.c.Client.CoreV1().Pods(e.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "listing pods: " + err.Error()
	}
	var b strings.Builder
	b.WriteString("pods:\n")
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  %s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			switch {
			case s.State.Waiting != nil:
				fmt.Fprintf(&b, " %s=waiting:%s:%s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
			case s.State.Terminated != nil:
				fmt.Fprintf(&b, " %s=exit:%d", s.Name, s.State.Terminated.ExitCode)
			}
		}
		b.WriteString("\n")
		// The end of what a container that failed said is most of the story.
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Terminated == nil || s.State.Terminated.ExitCode == 0 {
				continue
			}
			tail := int64(15)
			data, err := e.c.Client.CoreV1().Pods(e.namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: s.Name, TailLines: &tail}).DoRaw(ctx)
			if err == nil {
				fmt.Fprintf(&b, "    last lines of %s/%s:\n      %s\n", p.Name, s.Name, strings.ReplaceAll(strings.TrimSpace(string(data)), "\n", "\n      "))
			}
		}
	}
	return b.String()
}

// param is the value of a node's parameter, failing the test when it has none.
func param(t *testing.T, params []parameter, name string) string {
	t.Helper()
	for _, p := range params {
		if p.Name == name && p.Value != nil {
			return *p.Value
		}
	}
	t.Fatalf("no parameter %s with a value among %+v", name, params)
	return ""
}

// podOfNode is the pod Argo ran for a workflow node.
func (e *e2e) podOfNode(t *testing.T, wf *unstructured.Unstructured, node workflowNode) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := e.c.Client.CoreV1().Pods(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=" + wf.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].Annotations["workflows.argoproj.io/node-id"] == node.ID ||
			pods.Items[i].Annotations["workflows.argoproj.io/node-name"] == node.Name {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no pod of node %s (%s)\n%s", node.Name, node.ID, e.podSummary(t))
	return nil
}

// logOf is a container's log, read through the API as `kubectl logs` does.
func (e *e2e) logOf(t *testing.T, pod, container string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := e.c.Client.CoreV1().Pods(e.namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the log of %s/%s: %v", pod, container, err)
	}
	return string(data)
}

// jobName is the name of the job whose replicas run in the test's namespace (it holds
// one job); empty until a replica exists.
func (e *e2e) jobName(ctx context.Context) string {
	pods, err := e.c.Client.CoreV1().Pods(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: jobNameLabel})
	if err != nil || len(pods.Items) == 0 {
		return ""
	}
	return pods.Items[0].Labels[jobNameLabel]
}

// jobObjects lists the pods and Services of a job that still exist.
func (e *e2e) jobObjects(ctx context.Context, job string) (pods []corev1.Pod, services []string, err error) {
	selector := metav1.ListOptions{LabelSelector: jobNameLabel + "=" + job}
	podList, err := e.c.Client.CoreV1().Pods(e.namespace).List(ctx, selector)
	if err != nil {
		return nil, nil, err
	}
	serviceList, err := e.c.Client.CoreV1().Services(e.namespace).List(ctx, selector)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range serviceList.Items {
		services = append(services, s.Name)
	}
	return podList.Items, services, nil
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// readYAML decodes a YAML file strictly into obj.
func readYAML(t *testing.T, path string, obj any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(readFile(t, path), obj); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
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
