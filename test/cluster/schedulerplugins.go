package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// SchedulerPluginsBinary is scheduler-plugins' kube-scheduler (make
// cluster-bin-scheduler-plugins), in the bin directory.
const SchedulerPluginsBinary = "scheduler-plugins"

// SchedulerPluginsName is the profile StartSchedulerPlugins runs, the name
// scheduler-plugins' second-scheduler chart gives it: pods name it in
// spec.schedulerName.
const SchedulerPluginsName = "scheduler-plugins-scheduler"

// SchedulerPluginsPodGroups is the coscheduling plugin's PodGroup.
var SchedulerPluginsPodGroups = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}

// schedulerPluginsConfig runs one profile with the coscheduling plugin, as
// the module's manifests/coscheduling/scheduler-config.yaml does, under the
// second scheduler's name. A pod group that has not fit within
// permitWaitingTimeSeconds goes back to the queue for another try.
const schedulerPluginsConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %q
profiles:
- schedulerName: ` + SchedulerPluginsName + `
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
`

// SchedulerPluginsControllerBinary is scheduler-plugins' controller, built
// with its scheduler.
const SchedulerPluginsControllerBinary = "scheduler-plugins-controller"

// StartSchedulerPlugins runs scheduler-plugins as its second-scheduler chart
// installs it, until the test ends: its scheduler with the coscheduling
// plugin under SchedulerPluginsName next to kube-scheduler, its controller,
// and their CRDs; an opt-in of one test. The controller matters to
// scheduling: a pod coscheduling turned away waits for a PodGroup's update
// (or a new pod) before the scheduler tries it again, and the controller's
// status updates, as another group's pods end, are those updates. Without
// the binaries the test skips, and fails under CI=true.
func (c *Cluster) StartSchedulerPlugins(t testing.TB) {
	t.Helper()
	c.requireBinary(t, SchedulerPluginsBinary, "cluster-bin-scheduler-plugins")
	c.requireBinary(t, SchedulerPluginsControllerBinary, "cluster-bin-scheduler-plugins")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// PodGroups for the scheduler; the controller also reconciles ElasticQuotas.
	for _, crd := range []struct {
		manifest string
		served   schema.GroupVersionResource
	}{
		{"coscheduling/crd.yaml", SchedulerPluginsPodGroups},
		{"capacityscheduling/crd.yaml", schedulerPluginsElasticQuotas},
	} {
		name, err := c.installSchedulerPluginsCRD(ctx, crd.manifest, crd.served)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.removeCRD(t, name) })
	}
	config := filepath.Join(c.Dir, "scheduler-plugins.yaml")
	// The administrator's identity: the scheduler reads PodGroups and binds pods.
	if err := os.WriteFile(config, fmt.Appendf(nil, schedulerPluginsConfig, c.Kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	schedulerPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	controllerPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(c.Dir, "logs")
	scheduler, err := startComponent(c.BinDir, logDir, SchedulerPluginsBinary, SchedulerPluginsBinary, false,
		"--config="+config,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(schedulerPort),
		"--cert-dir="+filepath.Join(c.Dir, "pki", SchedulerPluginsBinary),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scheduler.stop(stopGrace) })
	controller, err := startComponent(c.BinDir, logDir, SchedulerPluginsControllerBinary, SchedulerPluginsControllerBinary, false,
		"--kubeconfig="+c.Kubeconfig,
		"--metricsAddr=0",
		"--probeAddr=127.0.0.1:"+strconv.Itoa(controllerPort),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { controller.stop(stopGrace) })
	components := []*component{scheduler, controller}
	t.Cleanup(func() {
		if t.Failed() {
			for _, comp := range components {
				t.Logf("%s (last 40 lines of %s):\n%s", comp.name, comp.logPath, tailFile(comp.logPath, 40))
			}
		}
	})
	selfSigned := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // health probe on loopback
	}}
	if err := waitFor(ctx, SchedulerPluginsBinary+" /healthz", components,
		httpOK(selfSigned, "https://127.0.0.1:"+strconv.Itoa(schedulerPort)+"/healthz")); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, SchedulerPluginsControllerBinary+" /readyz", components,
		httpOK(&http.Client{Timeout: 2 * time.Second}, "http://127.0.0.1:"+strconv.Itoa(controllerPort)+"/readyz")); err != nil {
		t.Fatal(err)
	}
}

// schedulerPluginsElasticQuotas is the capacity-scheduling plugin's quota,
// which scheduler-plugins' controller reconciles next to PodGroups.
var schedulerPluginsElasticQuotas = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}

// installSchedulerPluginsCRD creates the CRD of the module's
// manifests/<manifest> and waits until served is.
func (c *Cluster) installSchedulerPluginsCRD(ctx context.Context, manifest string, served schema.GroupVersionResource) (string, error) {
	dir, err := pinnedModuleDir(ctx, "scheduler-plugins", "sigs.k8s.io/scheduler-plugins")
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, "manifests", manifest)
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading scheduler-plugins' CRD: %w", err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(string(data)), "---")), &crd.Object); err != nil {
		return "", fmt.Errorf("parsing %s: %w", file, err)
	}
	if err := c.createCRD(ctx, crd); err != nil {
		return "", err
	}
	isServed := func(ctx context.Context) (bool, error) {
		_, err := c.dynamic.Resource(served).Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	}
	return crd.GetName(), waitFor(ctx, "scheduler-plugins' CRD "+crd.GetName(), c.components, isServed)
}

// createCRD creates crd once an earlier CRD of its name, which an earlier
// test removed, has gone.
func (c *Cluster) createCRD(ctx context.Context, crd *unstructured.Unstructured) error {
	absent := func(ctx context.Context) (bool, error) {
		_, err := c.dynamic.Resource(crdResource).Get(ctx, crd.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}
	if err := waitFor(ctx, "an earlier CRD "+crd.GetName()+" to go", c.components, absent); err != nil {
		return err
	}
	if _, err := c.dynamic.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating CRD %s: %w", crd.GetName(), err)
	}
	return nil
}

// removeCRD deletes a CRD a test installed and waits until it is gone, so
// that a later test may install it again.
func (c *Cluster) removeCRD(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.dynamic.Resource(crdResource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting CRD %s: %v", name, err)
		return
	}
	gone := func(ctx context.Context) (bool, error) {
		_, err := c.dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}
	if err := waitFor(ctx, "CRD "+name+" removed", c.components, gone); err != nil {
		t.Errorf("%v", err)
	}
}

// pinnedModuleDir is the module cache's copy of module at the version
// hack/cluster/<dir>/go.mod requires (its build downloaded it).
func pinnedModuleDir(ctx context.Context, dir, module string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	hackDir := filepath.Join(root, "hack", "cluster", dir)
	gomod, err := os.ReadFile(filepath.Join(hackDir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("reading the %s version: %w", module, err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		return "", fmt.Errorf("reading the %s version: none in hack/cluster/%s/go.mod", module, dir)
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+string(m[1]))
	cmd.Dir = hackDir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding module %s %s: %w", module, m[1], err)
	}
	var found struct{ Dir string }
	if err := json.Unmarshal(out, &found); err != nil || found.Dir == "" {
		return "", fmt.Errorf("finding module %s %s: %v: %s", module, m[1], err, strings.TrimSpace(string(out)))
	}
	return found.Dir, nil
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
