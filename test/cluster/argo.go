package cluster

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// ArgoBinaries are what Options.Argo needs in the bin directory, as `make cluster-bin-argo`
// names them.
var ArgoBinaries = []string{"workflow-controller", "argoexec"}

// ArgoExecutorImage is argoexec (bin/cluster/argoexec) in a FROM-scratch image, imported into
// the real node's containerd: the executor of every workflow pod.
const ArgoExecutorImage = "docker.io/local/argoexec:trainstep"

// ArgoNamespace is where the workflow controller keeps its ConfigMap and leader lease.
const ArgoNamespace = "argo"

// WorkflowResource is Argo's Workflow.
var WorkflowResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}

// WorkflowNode is the part of a Workflow's status.nodes entry tests read.
type WorkflowNode struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	DisplayName  string `json:"displayName"`
	Type         string `json:"type"`
	TemplateName string `json:"templateName"`
	Phase        string `json:"phase"`
	Message      string `json:"message"`
	Inputs       struct {
		Parameters []WorkflowParameter `json:"parameters"`
	} `json:"inputs"`
	Outputs struct {
		Parameters []WorkflowParameter `json:"parameters"`
		Result     *string             `json:"result"`
		ExitCode   *string             `json:"exitCode"`
	} `json:"outputs"`
}

// WorkflowParameter is one input or output parameter of a WorkflowNode.
type WorkflowParameter struct {
	Name  string  `json:"name"`
	Value *string `json:"value"`
}

// WorkflowNodes decodes wf's status.nodes, by node ID.
func WorkflowNodes(wf *unstructured.Unstructured) (map[string]WorkflowNode, error) {
	raw, _, err := unstructured.NestedMap(wf.Object, "status", "nodes")
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var nodes map[string]WorkflowNode
	if err := json.Unmarshal(data, &nodes); err != nil {
		return nil, err
	}
	return nodes, nil
}

// argoControllerHealthz is the controller's health endpoint port, on the node IP.
const argoControllerHealthz = "6060"

// startArgo installs Argo's CRDs from the module hack/cluster/argo pins, imports the executor
// image and runs the workflow controller in the first real node's namespace, where its ports
// are its own. Like Argo's own install, it lets no workflow's service account report task results:
// see AllowArgoExecutor.
func (c *Cluster) startArgo(ctx context.Context) error {
	if err := c.installArgoCRDs(ctx); err != nil {
		return err
	}
	c.mark("Argo CRDs")
	data, err := os.ReadFile(filepath.Join(c.BinDir, "argoexec"))
	if err != nil {
		return fmt.Errorf("reading argoexec: %w", err)
	}
	node := c.nodes[0]
	archive := filepath.Join(node.Dir, "argoexec-image.tar")
	defer os.Remove(archive)
	// The controller runs `argoexec init|wait`: the image's PATH (/) finds it.
	if err := writeImageArchive(archive, ArgoExecutorImage, []string{"/argoexec"}, []imageFile{
		{path: "/argoexec", mode: 0o755, data: data},
		{path: "/tmp/", mode: 0o1777, dir: true},
	}); err != nil {
		return err
	}
	if err := c.importIntoNodes(ctx, archive); err != nil {
		return err
	}
	c.argo = true
	return c.startArgoController(ctx)
}

// startArgoController runs the workflow controller in the first real node's namespace and
// waits until it is healthy: at the cluster's start, and when that node boots again after
// KillRealNode, as a controller's pod would be started again.
func (c *Cluster) startArgoController(ctx context.Context) error {
	node := c.nodes[0]
	kubeconfig, err := c.argoControllerKubeconfig()
	if err != nil {
		return err
	}
	// One controller: no leader to elect. Steps report their progress every 5 s
	// instead of every minute, so a test sees a training's progress change.
	controller, err := c.startInNodeWithEnv(node, "workflow-controller", []string{"LEADER_ELECTION_DISABLE=true", "ARGO_PROGRESS_PATCH_TICK_DURATION=5s"},
		"--kubeconfig", kubeconfig,
		"--executor-image", ArgoExecutorImage,
		"--executor-image-pull-policy", string(corev1.PullNever),
	)
	if err != nil {
		return err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	healthz := "http://" + node.Network.NodeIP + ":" + argoControllerHealthz + "/healthz"
	if err := waitFor(ctx, "the workflow controller /healthz", []*component{controller}, httpOK(plain, healthz)); err != nil {
		return err
	}
	c.mark("workflow controller")
	return nil
}

// argoExecutorConfig runs Argo's init and wait containers as PodSecurity `restricted`
// asks, as Argo's documentation recommends for such namespaces (argoexec needs no root):
// workflows then run in namespaces that enforce it.
const argoExecutorConfig = `securityContext:
  runAsNonRoot: true
  runAsUser: 8737
  allowPrivilegeEscalation: false
  capabilities: {drop: [ALL]}
  seccompProfile: {type: RuntimeDefault}
`

// argoControllerKubeconfig creates ArgoNamespace with the controller's (default)
// ConfigMap and returns the controller's kubeconfig, whose namespace that is.
func (c *Cluster) argoControllerKubeconfig() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ArgoNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace %s: %w", ArgoNamespace, err)
	}
	_, err = c.Client.CoreV1().ConfigMaps(ArgoNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "workflow-controller-configmap"},
		Data:       map[string]string{"executor": argoExecutorConfig},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating the workflow controller's ConfigMap: %w", err)
	}
	return filepath.Join(c.Dir, "workflow-controller.kubeconfig"), nil
}

// writeArgoCredentials writes the workflow controller's kubeconfig, in ArgoNamespace. It
// acts as an administrator, as Argo's cluster-wide install nearly does.
func (c *Cluster) writeArgoCredentials(ca *authority, pki string) error {
	pair, err := ca.issue(pki, "workflow-controller", pkix.Name{
		CommonName: "argo-workflow-controller", Organization: []string{"system:masters"},
	}, false)
	if err != nil {
		return err
	}
	path := filepath.Join(c.Dir, "workflow-controller.kubeconfig")
	return writeKubeconfig(path, c.Server, c.caPEM, credentials{certPEM: pair.CertPEM, keyPEM: pair.KeyPEM}, ArgoNamespace)
}

// installArgoCRDs creates the CRDs of Argo's manifests/base/crds/minimal and waits until
// Workflows are served.
func (c *Cluster) installArgoCRDs(ctx context.Context) error {
	dir, err := argoModuleDir(ctx)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "base", "crds", "minimal", "argoproj.io_*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("finding Argo's CRDs in %s: %v", dir, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("reading %s: %w", file, err)
		}
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &crd.Object); err != nil {
			return fmt.Errorf("parsing %s: %w", file, err)
		}
		if _, err := c.dynamic.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.GetName(), err)
		}
	}
	served := func(ctx context.Context) (bool, error) {
		_, err := c.dynamic.Resource(WorkflowResource).Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	}
	return waitFor(ctx, "Argo's Workflow CRD", c.components, served)
}

// argoVersionLine finds the Argo module's version in hack/cluster/argo/go.mod.
var argoVersionLine = regexp.MustCompile(`(?m)^\s*github\.com/argoproj/argo-workflows/v3 (v\S+)`)

// argoModuleDir is the module cache's copy of the Argo module hack/cluster/argo pins
// (make cluster-bin-argo downloaded it).
func argoModuleDir(ctx context.Context) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "hack", "cluster", "argo")
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("reading the Argo version: %w", err)
	}
	m := argoVersionLine.FindSubmatch(gomod)
	if m == nil {
		return "", errors.New("reading the Argo version: no github.com/argoproj/argo-workflows/v3 in hack/cluster/argo/go.mod")
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/argoproj/argo-workflows/v3@"+string(m[1]))
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding Argo's module %s: %w", m[1], err)
	}
	var module struct{ Dir string }
	if err := json.Unmarshal(out, &module); err != nil || module.Dir == "" {
		return "", fmt.Errorf("finding Argo's module %s: %v: %s", m[1], err, strings.TrimSpace(string(out)))
	}
	return module.Dir, nil
}

// AllowArgoExecutor lets ServiceAccount ns/serviceAccount create and patch
// WorkflowTaskResults, which Argo's executor writes from inside each workflow pod to hand the
// step's outputs to the controller: the minimum Argo's documentation asks of a workflow's
// service account (its quick-start binds this to the default ServiceAccount of namespace argo).
func (c *Cluster) AllowArgoExecutor(ctx context.Context, ns, serviceAccount string) error {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "argo-executor"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtaskresults"}, Verbs: []string{"create", "patch"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "argo-executor-" + serviceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: ns}},
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the Argo executor's Role in %s: %w", ns, err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding the Argo executor's Role to %s/%s: %w", ns, serviceAccount, err)
	}
	return nil
}
