package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// psJob is a TensorFlow job of one parameter server and n workers that
// exit 0 after workFor (the workers' KWOK Stage), restarted per replica on
// exit 137, with cleanPodPolicy All.
func psJob(t testing.TB, name string, workers int32, workFor time.Duration) []byte {
	t.Helper()
	one, all := int32(1), v1alpha1.CleanPodPolicyAll
	container := func() corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "tensorflow", Image: "registry.example/train:1", Command: []string{"python", "train.py"}}}}
	}
	job := v1alpha1.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TrainJobSpec{Framework: v1alpha1.FrameworkTensorFlow, ReplicaSpecs: map[v1alpha1.ReplicaType]*v1alpha1.ReplicaSpec{
			v1alpha1.ReplicaTypePS: {Replicas: &one, RestartPolicy: v1alpha1.RestartPolicyExitCode,
				Template: corev1.PodTemplateSpec{Spec: container()}},
			v1alpha1.ReplicaTypeWorker: {Replicas: &workers, RestartPolicy: v1alpha1.RestartPolicyExitCode,
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
					cluster.AnnotationExitAfter: workFor.String(), cluster.AnnotationExitCode: "0"}}, Spec: container()}},
		}, RunPolicy: v1alpha1.RunPolicy{CleanPodPolicy: &all}},
	}
	out, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// outcome is what one in-process run produced.
type outcome struct {
	res  result.Result
	err  error
	took time.Duration
}

// config is how these tests run the executor: the test's own identity (its
// runs re-attach to each other's objects), a short API timeout, and the
// Lease of its default duration.
func config(t testing.TB, c *cluster.Cluster, ns string, manifest []byte, kubeconfig string) executor.Config {
	if kubeconfig == "" {
		kubeconfig = c.Kubeconfig
	}
	return executor.Config{
		Identity: "test/" + t.Name(), Spec: manifest, Kubeconfig: kubeconfig, PodNamespace: ns,
		QPS: 200, Burst: 64, OutputsDir: t.TempDir(),
		APITimeout: apiTimeout, TerminationGrace: 30 * time.Second, CleanupTimeout: time.Minute,
		Logger: zaptest.NewLogger(t),
	}
}

// apiTimeout is the runs' --api-timeout.
const apiTimeout = 40 * time.Second

// start runs the executor in the background; wait returns its outcome.
func start(t testing.TB, cfg executor.Config) (wait func() outcome) {
	t.Helper()
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		began := time.Now()
		res, err := executor.Run(ctx, cfg)
		done <- outcome{res: res, err: err, took: time.Since(began)}
	}()
	return func() outcome {
		select {
		case o := <-done:
			return o
		case <-time.After(5 * time.Minute):
			t.Fatal("the run did not end within 5 minutes")
			return outcome{}
		}
	}
}

// output reads one of the run's output files.
func output(t testing.TB, cfg executor.Config, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cfg.OutputsDir, name))
	if err != nil {
		t.Fatalf("output %s: %v", name, err)
	}
	return string(b)
}

// podHistory records every instance of the job's pods, by pod name, through
// its own list and watch, which it starts again whenever the API server
// goes away: each name should have one instance when no replica failed.
type podHistory struct {
	mu        sync.Mutex
	instances map[string]map[string]bool
}

func recordPods(t testing.TB, c *cluster.Cluster, ns, job string) *podHistory {
	h := &podHistory{instances: map[string]map[string]bool{}}
	client := kubernetes.NewForConfigOrDie(c.Config)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	selector := metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job}
	go func() {
		for ctx.Err() == nil {
			list, err := client.CoreV1().Pods(ns).List(ctx, selector)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for i := range list.Items {
				h.saw(&list.Items[i])
			}
			opts := selector
			opts.ResourceVersion = list.ResourceVersion
			w, err := client.CoreV1().Pods(ns).Watch(ctx, opts)
			if err != nil {
				continue
			}
			for e := range w.ResultChan() {
				if pod, ok := e.Object.(*corev1.Pod); ok && e.Type != watch.Error {
					h.saw(pod)
				}
			}
			w.Stop()
		}
	}()
	return h
}

func (h *podHistory) saw(p *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.instances[p.Name] == nil {
		h.instances[p.Name] = map[string]bool{}
	}
	h.instances[p.Name][string(p.UID)] = true
}

// duplicates names the pods that had more than one instance.
func (h *podHistory) duplicates() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name, uids := range h.instances {
		if len(uids) > 1 {
			out = append(out, fmt.Sprintf("%s (%d instances)", name, len(uids)))
		}
	}
	return out
}

// count is how many pods were seen.
func (h *podHistory) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.instances)
}

// waitRunning waits until n of the job's pods run.
func waitRunning(t testing.TB, c *cluster.Cluster, ns, job string, n int) {
	t.Helper()
	testutil.Eventually(t, 2*time.Minute, fmt.Sprintf("%d running pods of %s", n, job), func() (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job})
		if err != nil {
			return false, nil // the API server may be restarting
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running == n, nil
	})
}

// jobObjects names what is left of the job: pods, Services, ConfigMaps,
// Secrets, NetworkPolicies and its Lease.
func jobObjects(t testing.TB, c *cluster.Cluster, ns, job string) []string {
	t.Helper()
	ctx := context.Background()
	selector := metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job}
	var left []string
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "services"}, {Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "secrets"}, {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	} {
		list, err := c.Dynamic().Resource(gvr).Namespace(ns).List(ctx, selector)
		if err != nil {
			t.Fatalf("listing %s: %v", gvr.Resource, err)
		}
		for _, item := range list.Items {
			left = append(left, gvr.Resource+"/"+item.GetName())
		}
	}
	return left
}

// checkEnded checks a run's phase, reason and restarts, and that nothing of
// the job is left.
func checkEnded(t testing.TB, c *cluster.Cluster, ns, job string, cfg executor.Config, o outcome, phase result.Phase, reason string, restarts string) {
	t.Helper()
	if o.res.Phase != phase || o.res.Reason != reason {
		t.Fatalf("the run ended %s/%s (%s; %v), want %s/%s", o.res.Phase, o.res.Reason, o.res.Message, o.err, phase, reason)
	}
	t.Logf("the run ended %s/%s in %s", o.res.Phase, o.res.Reason, o.took.Round(100*time.Millisecond))
	if got := output(t, cfg, "restarts"); got != restarts {
		t.Errorf("restarts %s, want %s", got, restarts)
	}
	if left := jobObjects(t, c, ns, job); len(left) > 0 {
		t.Errorf("left after the run: %v", left)
	}
}

// waitGone waits until none of the job's objects of resource is left.
func waitGone(t testing.TB, c *cluster.Cluster, ns, resource, job string, timeout time.Duration) {
	t.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: resource}
	testutil.Eventually(t, timeout, "the job's "+resource+" deleted", func() (bool, error) {
		list, err := c.Dynamic().Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName + "=" + job})
		return err == nil && len(list.Items) == 0, nil
	})
}
