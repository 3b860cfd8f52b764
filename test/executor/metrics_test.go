package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// fakeMetricsAPI is the test's own metrics.k8s.io: an HTTPS server on this
// host that kube-apiserver's aggregator reaches through an APIService, a
// Service without selector and its endpoints. Every pod it lists uses the
// same cpu, which the test sets.
type fakeMetricsAPI struct {
	c          *cluster.Cluster
	millicores atomic.Int64
}

// hostIP is an address of this host that is not loopback: endpoints must
// not be 127.0.0.0/8.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	const why = "this host has no IPv4 address but loopback for the aggregator to reach a test's APIService"
	if os.Getenv("CI") == "true" {
		t.Fatal(why + ": CI runs every test")
	}
	t.Skip(why)
	return ""
}

func (f *fakeMetricsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const base = "/apis/metrics.k8s.io/v1beta1"
	write := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.URL.Path == base:
		write(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "metrics.k8s.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: []string{"get", "list"}}}})
	case strings.HasPrefix(r.URL.Path, base+"/namespaces/") && strings.HasSuffix(r.URL.Path, "/pods"):
		ns := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, base+"/namespaces/"), "/pods")
		pods, err := f.c.Client.CoreV1().Pods(ns).List(r.Context(), metav1.ListOptions{LabelSelector: r.URL.Query().Get("labelSelector")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		list := metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: "metrics.k8s.io/v1beta1"}}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning {
				continue
			}
			cpu := resource.NewMilliQuantity(f.millicores.Load(), resource.DecimalSI)
			list.Items = append(list.Items, metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns, Labels: p.Labels},
				Timestamp: metav1.Now(), Window: metav1.Duration{Duration: 15 * time.Second},
				Containers: []metricsv1beta1.ContainerMetrics{{Name: p.Spec.Containers[0].Name, Usage: corev1.ResourceList{corev1.ResourceCPU: *cpu}}}})
		}
		write(list)
	default:
		http.NotFound(w, r)
	}
}

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// serveMetricsAPI registers f as v1beta1.metrics.k8s.io and waits until the
// aggregator reports it Available; the test's end removes it.
func (f *fakeMetricsAPI) serve(t *testing.T, ns string) {
	t.Helper()
	ip := hostIP(t)
	listener, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewUnstartedServer(f)
	server.Listener = listener
	server.StartTLS()
	t.Cleanup(server.Close)
	port := int32(listener.Addr().(*net.TCPAddr).Port)

	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}}
	if _, err := f.c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "metrics-server", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "metrics-server"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("https"), Port: &port, Protocol: ptrTo(corev1.ProtocolTCP)}},
	}
	if _, err := f.c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(f.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	apiService := map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
			"insecureSkipTLSVerify": true, "service": map[string]any{"name": "metrics-server", "namespace": ns, "port": 443}},
	}
	if _, err := dyn.Resource(apiServices).Create(ctx, &unstructured.Unstructured{Object: apiService}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(apiServices).Delete(context.Background(), "v1beta1.metrics.k8s.io", metav1.DeleteOptions{})
	})
	testutil.Eventually(t, time.Minute, "the aggregator to serve metrics.k8s.io/v1beta1", func(ctx context.Context) (bool, error) {
		list, err := f.c.Client.Discovery().ServerResourcesForGroupVersion("metrics.k8s.io/v1beta1")
		return err == nil && len(list.APIResources) > 0, nil
	})
}

func ptrTo[T any](v T) *T { return &v }

// waitTargets waits until the run logged the worker targets want, in
// order, and no other.
func waitTargets(t *testing.T, log *runLog, want ...int64) {
	t.Helper()
	var got []int64
	testutil.Eventually(t, 2*time.Minute, fmt.Sprintf("worker targets %v", want), func() bool {
		got = got[:0]
		for _, e := range log.logs.All() {
			if e.Message == "elastic worker target changed" {
				to, _ := e.ContextMap()["to"].(int64)
				got = append(got, to)
			}
		}
		return len(got) >= len(want)
	})
	if !slices.Equal(got, want) {
		t.Fatalf("worker targets %v, want %v", got, want)
	}
}

// With elasticPolicy.metrics — a Resource cpu metric at 50% of the
// request — an elastic 2..6 job is refused (Invalid, nothing created)
// while the cluster serves no metrics.k8s.io. Served by the test's own
// metrics API, the job starts with Worker.replicas 2 workers; at twice the
// target usage it grows to ceil(2 × 2) = 4, then to the maxReplicas 6
// (ceil(4 × 2) = 8, bounded); the first worker to succeed ends it, with no
// restart.
func TestElasticWorkersFollowAResourceMetric(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	job := newJob("hpa", v1alpha1.FrameworkPyTorch).replicas(worker, 2, nil).
		with(func(j *v1alpha1.TrainJob) {
			lo, hi, target := int32(2), int32(6), int32(50)
			j.Spec.ElasticPolicy = &v1alpha1.ElasticPolicy{MinReplicas: &lo, MaxReplicas: &hi, Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}}}
			j.Spec.ReplicaSpecs[worker].Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}).yaml(t)

	refused := runJob(t, c, ns, job)
	var re *result.Error
	if !errors.As(refused.err, &re) || refused.res.Phase != result.PhaseInvalid || !strings.Contains(refused.res.Message, "metrics.k8s.io") {
		t.Fatalf("without metrics.k8s.io: phase %s (%s), err %v; want Invalid naming metrics.k8s.io", refused.res.Phase, refused.res.Message, refused.err)
	}
	if code := refused.res.Phase.ExitCode(); code != result.ExitInvalid {
		t.Errorf("exit code %d, want %d", code, result.ExitInvalid)
	}
	if pods := listPods(t, c, ns, "hpa"); len(pods) != 0 {
		t.Fatalf("%d pods created by a refused job", len(pods))
	}
	t.Logf("refused: %s", refused.res.Message)

	metrics := &fakeMetricsAPI{c: c}
	metrics.millicores.Store(1000) // 100% of the 1-cpu request: twice the target
	metrics.serve(t, ns)
	log, record := recordLog()
	wait := startJob(t, c, ns, job, record)
	waitTargets(t, log, 4)
	if n := len(livePods(t, c, ns, "hpa")); n > 4 {
		t.Fatalf("%d workers at the target 4", n)
	}
	waitTargets(t, log, 4, 6)
	waitRunning(t, c, ns, "hpa", 6)
	// The target is on the job's Service, for a retried step to go on from.
	svc, err := c.Client.CoreV1().Services(ns).Get(context.Background(), "hpa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := svc.Annotations[v1alpha1.AnnotationWorkerTarget]; got != "6" {
		t.Fatalf("the job's Service records worker target %q, want 6", got)
	}
	// 40% proposes ceil(0.8 × 6) = 5: the scale-down waits for the
	// stabilisation window, so two evaluations later the six still run.
	metrics.millicores.Store(400)
	held := log.waitLine(t, time.Minute, 0, "elastic scale-down held by the stabilisation window")
	if proposal := log.logs.All()[held-1].ContextMap()["proposal"]; proposal != int64(5) {
		t.Errorf("at 40%%: the metric proposed %v workers, want ceil(6 × 40/50) = 5", proposal)
	}
	time.Sleep(policy.AutoscalePeriod + 5*time.Second)
	waitTargets(t, log, 4, 6)
	if n := len(livePods(t, c, ns, "hpa")); n != 6 {
		t.Fatalf("%d workers within the scale-down stabilisation window, want 6", n)
	}
	patchAnnotations(t, c, ns, "hpa-worker-0", exitsAfter("0s", 0))
	out := wait()
	if out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("phase %s/%s (%s), want Succeeded", out.res.Phase, out.res.Reason, out.res.Message)
	}
	if out.res.Restarts != 0 {
		t.Errorf("restarts %d, want 0", out.res.Restarts)
	}

	// Training Operator's imagenet example, unchanged (KWOK pulls no
	// image): its cpu metric at 80% of a 4-cpu request is evaluated, and at
	// 25% the two workers it starts with stay for the stabilisation window.
	manifest, err := os.ReadFile(filepath.Join("..", "..", "pkg", "frameworks", "testdata", "pytorchjob_elastic_imagenet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	metrics.millicores.Store(1000)
	imagenetLog, record := recordLog()
	wait = startJob(t, c, ns, manifest, record)
	const imagenet = "elastic-example-imagenet"
	waitRunning(t, c, ns, imagenet, 2)
	// 1 of 4 cpus is 25%: ceil(2 × 25/80) = 1, held back for the window.
	held = imagenetLog.waitLine(t, time.Minute, 0, "elastic scale-down held by the stabilisation window")
	if proposal := imagenetLog.logs.All()[held-1].ContextMap()["proposal"]; proposal != int64(1) {
		t.Errorf("imagenet: the metric proposed %v workers, want ceil(2 × 25/80) = 1", proposal)
	}
	if n := len(livePods(t, c, ns, imagenet)); n != 2 {
		t.Fatalf("imagenet: %d workers, want Worker.replicas 2 held through the stabilisation window", n)
	}
	if changes := imagenetLog.find(0, "elastic worker target changed"); changes >= 0 {
		t.Fatalf("imagenet: the worker target changed within the stabilisation window:\n%s", imagenetLog.messages(0))
	}
	patchAnnotations(t, c, ns, imagenet+"-worker-0", exitsAfter("0s", 0))
	if out := wait(); out.res.Phase != result.PhaseSucceeded {
		t.Fatalf("imagenet: phase %s/%s (%s), want Succeeded", out.res.Phase, out.res.Reason, out.res.Message)
	}
}
