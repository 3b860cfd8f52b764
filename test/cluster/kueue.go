package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// KueueBinary is Kueue's manager (make cluster-bin-kueue), in the bin directory.
const KueueBinary = "kueue"

// KueueNamespaceLabel marks the namespaces whose pods Kueue manages: its
// webhooks and its pod integration see no other namespace, so tests without
// Kueue never meet it. KueueManage sets it.
const KueueNamespaceLabel = "test.trainstep.dev/kueue"

// Kueue's install, as its config/default kustomization names it.
const (
	KueueSystemNamespace = "kueue-system"
	kueueWebhookService  = "kueue-webhook-service"
	kueueWebhookSecret   = "kueue-webhook-server-cert"
	kueueNamePrefix      = "kueue-"
	kueueFinalizer       = "kueue.x-k8s.io/managed"
)

// Kueue's resources (kueue.x-k8s.io/v1beta2, the version it stores).
var (
	KueueResourceFlavors = kueueResource("resourceflavors")
	KueueClusterQueues   = kueueResource("clusterqueues")
	KueueLocalQueues     = kueueResource("localqueues")
	KueueWorkloads       = kueueResource("workloads")
	// KueueWorkloadPriorityClasses are the priorities Kueue's label
	// kueue.x-k8s.io/priority-class names.
	KueueWorkloadPriorityClasses = kueueResource("workloadpriorityclasses")
)

func kueueResource(r string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: r}
}

var (
	mutatingWebhooks   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	validatingWebhooks = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
)

// kueueConfig is the manager's Configuration: the plain-pod integration only,
// for namespaces labelled KueueNamespaceLabel, with Kueue's internal
// certificate management for its webhook Service. The visibility API server
// is off: it needs an APIService this cluster does not route.
const kueueConfig = `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: ` + KueueSystemNamespace + `
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  port: %d
  certDir: %q
leaderElection:
  leaderElect: false
clientConnection:
  qps: 50
  burst: 100
internalCertManagement:
  enable: true
  webhookServiceName: ` + kueueWebhookService + `
  webhookSecretName: ` + kueueWebhookSecret + `
managedJobsNamespaceSelector:
  matchLabels:
    ` + KueueNamespaceLabel + `: "true"
integrations:
  frameworks:
  - pod
featureGates:
  VisibilityOnDemand: false
`

// StartKueue installs Kueue, at the version hack/cluster/kueue pins, until
// the test ends: its CRDs and webhooks from the module's config/components,
// and its manager as a process of this host with internal certificate
// management and the plain-pod integration for the namespaces KueueManage
// labels. kube-apiserver reaches the webhooks through a Service without
// selector whose EndpointSlice names a non-loopback address of this host.
// Without the binary the test skips, and fails under CI=true.
func (c *Cluster) StartKueue(t testing.TB) {
	t.Helper()
	c.requireBinary(t, KueueBinary, "cluster-bin-kueue")
	hostIP, err := nonLoopbackIPv4()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	module, err := pinnedModuleDir(ctx, "kueue", "sigs.k8s.io/kueue")
	if err != nil {
		t.Fatal(err)
	}
	ports, err := freePortList(2)
	if err != nil {
		t.Fatal(err)
	}
	healthPort, webhookPort := ports[0], ports[1]
	if err := c.kueueNamespaceAndService(ctx, hostIP, webhookPort); err != nil {
		t.Fatal(err)
	}
	if err := c.createKueueCertSecret(ctx, module); err != nil {
		t.Fatal(err)
	}
	crds, err := c.installKueueCRDs(ctx, module)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-registered first: the CRDs go once the manager stopped
	// and nothing of Kueue's is left holding a finalizer.
	t.Cleanup(func() {
		c.dropKueueFinalizers(t, crds)
		for _, crd := range crds {
			c.removeCRD(t, crd)
		}
		c.removeKueueService(t)
	})
	webhooks, err := c.installKueueWebhooks(ctx, module)
	if err != nil {
		t.Fatal(err)
	}
	// Without the manager the webhooks refuse every pod of a labelled
	// namespace: they go before it stops.
	certDir := filepath.Join(c.Dir, "pki", KueueBinary)
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(c.Dir, "kueue.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, kueueConfig, healthPort, webhookPort, certDir), 0o600); err != nil {
		t.Fatal(err)
	}
	mountCtx, stopMount := context.WithCancel(context.Background())
	mounted := c.mountKueueCerts(mountCtx, certDir)
	comp, err := startComponent(c.BinDir, filepath.Join(c.Dir, "logs"), KueueBinary, KueueBinary, false,
		"--config="+config,
		"--kubeconfig="+c.Kubeconfig,
	)
	if err != nil {
		stopMount()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.removeKueueWebhooks(t, webhooks)
		comp.stop(stopGrace)
		stopMount()
		<-mounted
		if t.Failed() {
			t.Logf("%s (last 60 lines of %s):\n%s", KueueBinary, comp.logPath, tailFile(comp.logPath, 60))
		}
	})
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, "kueue /readyz", []*component{comp},
		httpOK(plain, "http://127.0.0.1:"+strconv.Itoa(healthPort)+"/readyz")); err != nil {
		t.Fatalf("%v\n%s", err, tailFile(comp.logPath, 40))
	}
	// Ready means listening; this proves kube-apiserver reaches the webhook
	// and trusts the certificate Kueue made.
	if err := waitFor(ctx, "kube-apiserver to call Kueue's webhooks", []*component{comp}, c.kueueWebhookAnswers); err != nil {
		t.Fatalf("%v\n%s", err, tailFile(comp.logPath, 40))
	}
}

// KueueManage puts namespace ns under Kueue: its pods that name a queue are
// Kueue's to admit.
func (c *Cluster) KueueManage(t testing.TB, ns string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, KueueNamespaceLabel)
	if _, err := c.Client.CoreV1().Namespaces().Patch(context.Background(), ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling namespace %s for Kueue: %v", ns, err)
	}
}

// kueueNamespaceAndService creates Kueue's namespace and its webhook Service,
// whose one endpoint is this host's hostIP:port, where the manager listens.
// kube-apiserver (--enable-aggregator-routing) dials endpoints, not the
// Service's cluster IP, which nothing on this host routes.
func (c *Cluster) kueueNamespaceAndService(ctx context.Context, hostIP string, port int) error {
	gone := func(ctx context.Context) (bool, error) {
		ns, err := c.Client.CoreV1().Namespaces().Get(ctx, KueueSystemNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp == nil), nil
	}
	if err := waitFor(ctx, "an earlier namespace "+KueueSystemNamespace+" to go", c.components, gone); err != nil {
		return err
	}
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueSystemNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", KueueSystemNamespace, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: kueueWebhookService, Namespace: KueueSystemNamespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(port),
		}}},
	}
	if _, err := c.Client.CoreV1().Services(KueueSystemNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Kueue's webhook Service: %w", err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: kueueWebhookService, Namespace: KueueSystemNamespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: kueueWebhookService,
				discoveryv1.LabelManagedBy:   "test.trainstep.dev",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		// The Service's port has no name: the slice's port is named "" too.
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices(KueueSystemNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Kueue's webhook EndpointSlice: %w", err)
	}
	return nil
}

// createKueueCertSecret creates the module's
// config/components/internalcert/secret.yaml, as config/default names it:
// the empty Secret Kueue's certificate rotator fills.
func (c *Cluster) createKueueCertSecret(ctx context.Context, module string) error {
	var secret corev1.Secret
	if err := readYAML(filepath.Join(module, "config", "components", "internalcert", "secret.yaml"), &secret); err != nil {
		return err
	}
	secret.Name, secret.Namespace = kueueNamePrefix+secret.Name, KueueSystemNamespace
	if secret.Name != kueueWebhookSecret {
		return fmt.Errorf("Kueue's certificate Secret is %s, the configuration names %s", secret.Name, kueueWebhookSecret)
	}
	if _, err := c.Client.CoreV1().Secrets(KueueSystemNamespace).Create(ctx, &secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Kueue's certificate Secret: %w", err)
	}
	return nil
}

// removeKueueService deletes what kueueNamespaceAndService created but the
// namespace, and the certificate Secret Kueue made.
func (c *Cluster) removeKueueService(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := []error{
		c.Client.CoreV1().Services(KueueSystemNamespace).Delete(ctx, kueueWebhookService, metav1.DeleteOptions{}),
		c.Client.DiscoveryV1().EndpointSlices(KueueSystemNamespace).Delete(ctx, kueueWebhookService, metav1.DeleteOptions{}),
		c.Client.CoreV1().Secrets(KueueSystemNamespace).Delete(ctx, kueueWebhookSecret, metav1.DeleteOptions{}),
	}
	for _, err := range errs {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing Kueue's webhook Service: %v", err)
		}
	}
}

// kueueKustomization is what StartKueue reads of a kustomization.yaml.
type kueueKustomization struct {
	Resources []string `json:"resources"`
	Patches   []struct {
		Path string `json:"path"`
	} `json:"patches"`
}

// installKueueCRDs creates the CRDs of the module's
// config/components/crd/kustomization.yaml with its conversion-webhook
// patches, pointed at the webhook Service, and waits until each is
// established. It returns their names.
func (c *Cluster) installKueueCRDs(ctx context.Context, module string) ([]string, error) {
	dir := filepath.Join(module, "config", "components", "crd")
	var k kueueKustomization
	if err := readYAML(filepath.Join(dir, "kustomization.yaml"), &k); err != nil {
		return nil, err
	}
	conversions := map[string]any{}
	for _, p := range k.Patches {
		var patch unstructured.Unstructured
		if err := readYAML(filepath.Join(dir, p.Path), &patch.Object); err != nil {
			return nil, err
		}
		conv, found, err := unstructured.NestedMap(patch.Object, "spec", "conversion")
		if err != nil || !found {
			return nil, fmt.Errorf("%s: no spec.conversion (%v)", p.Path, err)
		}
		// What kustomize's namePrefix and namespace do to the Service reference.
		_ = unstructured.SetNestedField(conv, kueueWebhookService, "webhook", "clientConfig", "service", "name")
		_ = unstructured.SetNestedField(conv, KueueSystemNamespace, "webhook", "clientConfig", "service", "namespace")
		conversions[patch.GetName()] = conv
	}
	var names []string
	for _, r := range k.Resources {
		var crd unstructured.Unstructured
		if err := readYAML(filepath.Join(dir, r), &crd.Object); err != nil {
			return nil, err
		}
		if conv, ok := conversions[crd.GetName()]; ok {
			if err := unstructured.SetNestedField(crd.Object, conv, "spec", "conversion"); err != nil {
				return nil, err
			}
		}
		if err := c.createCRD(ctx, &crd); err != nil {
			return names, err
		}
		names = append(names, crd.GetName())
	}
	for _, name := range names {
		established := func(ctx context.Context) (bool, error) {
			crd, err := c.dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		}
		if err := waitFor(ctx, "CRD "+name+" established", c.components, established); err != nil {
			return names, err
		}
	}
	return names, nil
}

// installKueueWebhooks creates the module's
// config/components/webhook/manifests.yaml as config/default names them,
// each webhook limited to namespaces labelled KueueNamespaceLabel. Kueue
// injects their CA bundle. It returns what it created.
func (c *Cluster) installKueueWebhooks(ctx context.Context, module string) ([]*unstructured.Unstructured, error) {
	file := filepath.Join(module, "config", "components", "webhook", "manifests.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading Kueue's webhooks: %w", err)
	}
	var created []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return created, fmt.Errorf("reading %s: %w", file, err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return created, fmt.Errorf("parsing %s: %w", file, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvr := validatingWebhooks
		if obj.GetKind() == "MutatingWebhookConfiguration" {
			gvr = mutatingWebhooks
		}
		obj.SetName(kueueNamePrefix + obj.GetName())
		hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		for i := range hooks {
			h := hooks[i].(map[string]any)
			_ = unstructured.SetNestedField(h, kueueWebhookService, "clientConfig", "service", "name")
			_ = unstructured.SetNestedField(h, KueueSystemNamespace, "clientConfig", "service", "namespace")
			_ = unstructured.SetNestedStringMap(h, map[string]string{KueueNamespaceLabel: "true"}, "namespaceSelector", "matchLabels")
		}
		if err := unstructured.SetNestedSlice(obj.Object, hooks, "webhooks"); err != nil {
			return created, err
		}
		_ = c.dynamic.Resource(gvr).Delete(ctx, obj.GetName(), metav1.DeleteOptions{}) // an earlier test's
		out, err := c.dynamic.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return created, fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		created = append(created, out)
	}
	return created, nil
}

func (c *Cluster) removeKueueWebhooks(t testing.TB, webhooks []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, w := range webhooks {
		gvr := validatingWebhooks
		if w.GetKind() == "MutatingWebhookConfiguration" {
			gvr = mutatingWebhooks
		}
		if err := c.dynamic.Resource(gvr).Delete(ctx, w.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s: %v", w.GetKind(), w.GetName(), err)
		}
	}
}

// kueueWebhookAnswers reports whether a dry-run create of a ResourceFlavor,
// which Kueue's webhooks default and validate, passes.
func (c *Cluster) kueueWebhookAnswers(ctx context.Context) (bool, error) {
	flavor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": KueueResourceFlavors.GroupVersion().String(), "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": "webhook-probe"},
	}}
	_, err := c.dynamic.Resource(KueueResourceFlavors).Create(ctx, flavor, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err == nil, err
}

// mountKueueCerts does what a kubelet does for Kueue's pod: it copies the
// webhook certificate Secret Kueue writes into certDir, as tls.crt and
// tls.key, whenever it changes, until ctx ends. The returned channel closes
// when it stopped.
func (c *Cluster) mountKueueCerts(ctx context.Context, certDir string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var written map[string][]byte
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			secret, err := c.Client.CoreV1().Secrets(KueueSystemNamespace).Get(ctx, kueueWebhookSecret, metav1.GetOptions{})
			if err == nil && len(secret.Data["tls.crt"]) > 0 && len(secret.Data["tls.key"]) > 0 &&
				(!bytes.Equal(written["tls.crt"], secret.Data["tls.crt"]) || !bytes.Equal(written["tls.key"], secret.Data["tls.key"])) {
				if writeFilesAtomically(certDir, map[string][]byte{"tls.key": secret.Data["tls.key"], "tls.crt": secret.Data["tls.crt"]}) == nil {
					written = secret.Data
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// writeFilesAtomically writes each file by renaming a complete temporary
// file over it, the key before the certificate that names it.
func writeFilesAtomically(dir string, files map[string][]byte) error {
	for _, name := range []string{"tls.key", "tls.crt"} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, files[name], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// dropKueueFinalizers removes, once Kueue is gone, the finalizers it left:
// on its own objects (a Workload in use) and on pods it managed. Nothing
// would ever remove them, and they would hold the CRDs and namespaces.
func (c *Cluster) dropKueueFinalizers(t testing.TB, crds []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	for _, name := range crds {
		resource, _, _ := strings.Cut(name, ".")
		gvr := kueueResource(resource)
		list, err := c.dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("listing %s: %v", name, err)
			continue
		}
		for _, obj := range list.Items {
			if len(obj.GetFinalizers()) == 0 {
				continue
			}
			_, err := c.dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, unfinalize, metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing the finalizers of %s %s/%s: %v", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
			}
		}
	}
	pods, err := c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		var keep []string
		for _, f := range p.Finalizers {
			if f != kueueFinalizer {
				keep = append(keep, f)
			}
		}
		if len(keep) == len(p.Finalizers) {
			continue
		}
		patch := fmt.Appendf(nil, `{"metadata":{"finalizers":%s}}`, jsonList(keep))
		if _, err := c.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing Kueue's finalizer from pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
}

func jsonList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}

// readYAML reads one YAML document into into.
func readYAML(file string, into any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("parsing %s: %w", file, err)
	}
	return nil
}

// nonLoopbackIPv4 is an IPv4 address of this host outside 127.0.0.0/8, which
// an EndpointSlice accepts: that of the interface of the default route, else
// of the first interface that is up.
func nonLoopbackIPv4() (string, error) {
	preferred := defaultRouteInterface()
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing network interfaces: %w", err)
	}
	var first string
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok || ipnet.IP.To4() == nil || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() {
				continue
			}
			if iface.Name == preferred {
				return ipnet.IP.String(), nil
			}
			if first == "" {
				first = ipnet.IP.String()
			}
		}
	}
	if first == "" {
		return "", errors.New("this host has no IPv4 address outside 127.0.0.0/8: kube-apiserver cannot reach Kueue's webhooks (an EndpointSlice refuses loopback addresses)")
	}
	return first, nil
}

var defaultRoute = regexp.MustCompile(`(?m)^(\S+)\s+00000000\s`)

// defaultRouteInterface names the interface of the IPv4 default route, or "".
func defaultRouteInterface() string {
	data, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return ""
	}
	if m := defaultRoute.FindSubmatch(data); m != nil {
		return string(m[1])
	}
	return ""
}

// freePortList asks the kernel for n distinct unused ports (held open until
// all are chosen, so none is handed out twice).
func freePortList(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
