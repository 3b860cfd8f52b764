package cluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/internal/testutil"
)

// startTimeout bounds the shared cluster's start-up, generous for two busy cores.
const startTimeout = 3 * time.Minute

var (
	shared     *Cluster
	skipReason string // set when the binaries are missing outside CI
)

// Main is a package's TestMain: it starts one cluster with DefaultNodes, shared by the
// package's tests through Get, runs them, stops the cluster and exits.
//
// Without the binaries it fails under CI=true and otherwise prints one message naming
// `make cluster-bin` and lets every test that calls Get skip. A cluster that does not start
// fails the run either way.
func Main(m *testing.M) {
	os.Exit(runMain(m, Options{}))
}

// MainWith is Main with the shared cluster's options given (BinDir and, when
// empty, Nodes are filled in).
func MainWith(m *testing.M, opts Options) {
	os.Exit(runMain(m, opts))
}

func runMain(m *testing.M, opts Options) int {
	binDir := DefaultBinDir()
	if missing := MissingBinaries(binDir); len(missing) > 0 {
		msg := fmt.Sprintf("test cluster binaries missing in %s (%s); build them with `make cluster-bin`",
			binDir, strings.Join(missing, ", "))
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "FAIL: "+msg)
			return 1
		}
		fmt.Fprintln(os.Stderr, "SKIP: "+msg)
		skipReason = msg
		return m.Run()
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	started := time.Now()
	opts.BinDir = binDir
	if len(opts.Nodes) == 0 {
		opts.Nodes = DefaultNodes()
	}
	c, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: starting the test cluster: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "test cluster ready in %s (%s)\n", time.Since(started).Round(10*time.Millisecond), c.StartupSummary())
	shared = c
	defer c.Stop()

	// An interrupted `go test` still stops the cluster (a killed one relies on Pdeathsig).
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "%s: stopping the test cluster; tests still running will fail\n", sig)
		c.Stop()
		os.Exit(1)
	}()

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "tests failed; test cluster component logs:\n%s", c.LogTails(60))
	}
	return code
}

// Get returns the cluster Main started. When a test using it fails, the end of every
// component's log is added to the test's output.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if shared == nil {
		t.Fatal("no test cluster: call cluster.Main(m) from the package's TestMain")
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("test cluster component logs:\n%s", shared.LogTails(40))
		}
	})
	return shared
}

var nonNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace named after the test (GenerateName) and deletes it when
// the test ends. It returns once the namespace's default ServiceAccount exists, so pods
// can be created right away.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	prefix := strings.Trim(nonNameChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(prefix) > 40 {
		prefix = strings.TrimRight(prefix[:40], "-")
	}
	return c.NamespaceWithPrefix(t, prefix+"-")
}

// NamespaceWithPrefix is Namespace with the name's prefix given: the API server appends
// five random characters to it.
func (c *Cluster) NamespaceWithPrefix(t testing.TB, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The namespace controller finishes the deletion; nothing here waits for it.
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	defaultAccount := func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	if err := waitFor(ctx, "the default ServiceAccount of "+ns.Name, c.components, defaultAccount); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// EnforceRestricted labels namespace ns pod-security.kubernetes.io/enforce: restricted and
// waits until the API server refuses a pod there that sets no securityContext: the
// PodSecurity admission reads namespaces from its own cache, so the label does not hold at
// once.
func (c *Cluster) EnforceRestricted(t testing.TB, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/enforce-version":"latest"}}}`)
	if _, err := c.Client.CoreV1().Namespaces().Patch(ctx, ns, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("enforcing PodSecurity restricted in %s: %v", ns, err)
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root-probe", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.com/probe:1"}}},
	}
	testutil.Eventually(t, 10*time.Second, "namespace "+ns+" labelled restricted to refuse a pod that sets no securityContext",
		func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil {
				return false, fmt.Errorf("the dry-run create was admitted")
			}
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "PodSecurity"), err
		})
}

// ServiceAccountToken returns a one-hour token for ServiceAccount ns/sa, minted with the
// TokenRequest API; the ServiceAccount is created if it does not exist. The token carries
// only what RBAC grants that account.
func (c *Cluster) ServiceAccountToken(t testing.TB, ns, sa string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ServiceAccount %s/%s: %v", ns, sa, err)
	}
	expiry := int64(time.Hour / time.Second)
	req, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", ns, sa, err)
	}
	return req.Status.Token
}

// PodToken returns a one-hour token for pod's ServiceAccount bound to pod, as the kubelet
// mounts one into a pod: the API server names the pod in its user's extra
// (authentication.kubernetes.io/pod-name and pod-uid) and refuses the token once the pod
// is gone.
func (c *Cluster) PodToken(t testing.TB, pod *corev1.Pod) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	expiry := int64(time.Hour / time.Second)
	req, err := c.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token of pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return req.Status.Token
}

// InstallArgoCRDs creates Argo's CRDs (its minimal manifests) on a cluster without Argo's
// controller, for tests that need Workflow objects to own their pods; idempotent.
func (c *Cluster) InstallArgoCRDs(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.installArgoCRDs(ctx); err != nil {
		t.Fatalf("installing Argo's CRDs: %v", err)
	}
}

// KubeconfigForToken writes a kubeconfig that acts with token against this cluster, with
// namespace as its context's namespace (empty: none), and returns its path. The file is
// removed when the test ends.
func (c *Cluster) KubeconfigForToken(t testing.TB, token, namespace string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(path, c.Server, c.caPEM, credentials{token: token}, namespace); err != nil {
		t.Fatal(err)
	}
	return path
}

// ConfigForToken is the rest.Config equivalent of KubeconfigForToken.
func (c *Cluster) ConfigForToken(token string) *rest.Config {
	return restConfigFor(c.Server, c.caPEM, credentials{token: token})
}

// RealNodeEnv opts a test run into tests that need the real node (Options.RealNode):
// `make test` and `make integration` set it to 1 (to 0 with REAL_NODE=0). They need root and
// more than the KWOK tests do.
const RealNodeEnv = "TRAINSTEP_REAL_NODE"

// RequireRealNode skips the test unless RealNodeEnv is 1, and fails it when this machine lacks
// what the real node needs. Under CI=true it never skips: a test run there without the real
// node fails. It returns the bin directory to start the cluster from.
func RequireRealNode(t testing.TB) string {
	t.Helper()
	if os.Getenv(RealNodeEnv) != "1" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("needs the real node, which CI=true runs: set %s=1 (make test does) on a machine with root", RealNodeEnv)
		}
		t.Skipf("needs the real node: run with %s=1 (make test, make integration-real-node)", RealNodeEnv)
	}
	binDir := DefaultBinDir()
	missing := append(MissingBinaries(binDir), RealNodeMissing(binDir)...)
	if len(missing) > 0 {
		t.Fatalf("%v: missing %s (as root: `make cluster-bin cluster-bin-node` and hack/cluster/install-node-deps.sh)",
			ErrRealNodeUnavailable, strings.Join(missing, ", "))
	}
	return binDir
}

// RequireArgo is RequireRealNode for tests that also need Argo (Options.Argo): it fails the
// test when ArgoBinaries are missing.
func RequireArgo(t testing.TB) string {
	t.Helper()
	binDir := RequireRealNode(t)
	if missing := MissingBinaries(binDir, ArgoBinaries...); len(missing) > 0 {
		t.Fatalf("%v in %s: %s (build them with `make cluster-bin-argo`)", ErrBinariesMissing, binDir, strings.Join(missing, ", "))
	}
	return binDir
}

// requireBinary skips a test that needs an opt-in component whose binary
// is not built (make target builds it), and fails it under CI=true.
func (c *Cluster) requireBinary(t testing.TB, name, target string) {
	t.Helper()
	if missing := MissingBinaries(c.BinDir, name); len(missing) > 0 {
		testutil.PrerequisiteMissing(t, "%v in %s: %s (build it with `make %s`)", ErrBinariesMissing, c.BinDir, name, target)
	}
}

// Dynamic is an admin dynamic client of the cluster, for objects of CRDs.
func (c *Cluster) Dynamic() dynamic.Interface { return c.dynamic }

// CreatePriorityClass creates the cluster-scoped PriorityClass name of value, removed when the
// test ends.
func (c *Cluster) CreatePriorityClass(ctx context.Context, t testing.TB, name string, value int32) error {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating PriorityClass %s: %w", name, err)
	}
	t.Cleanup(func() {
		_ = c.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// kube-apiserver's Priority admission reads classes from an informer: a
	// pod created at once may meet "no PriorityClass with name". A dry run
	// of such a pod says when admission sees it.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "priority-probe-"}, Spec: corev1.PodSpec{
		PriorityClassName: name, Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil || !strings.Contains(err.Error(), "no PriorityClass with name"), nil
	})
}
