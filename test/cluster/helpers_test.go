package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/trainstep/trainstep/test/cluster"
)

// podTimeout is generous: on two busy cores a pod's life takes seconds, never minutes.
const podTimeout = 2 * time.Minute

// newPod is a one-container pod; annotations drive the KWOK Stages.
func newPod(name string, policy corev1.RestartPolicy, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy: policy,
			Containers:    []corev1.Container{{Name: "main", Image: "registry.example/trainer:1"}},
		},
	}
}

func createPod(t *testing.T, c *cluster.Cluster, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return created
}

// watchPod records from, then every later version of the pod, until done(pod) holds, and
// returns them in order (the last one satisfies done). Watching from from's resource
// version misses no change, however fast the cluster is.
func watchPod(t *testing.T, c *cluster.Cluster, from *corev1.Pod, done func(*corev1.Pod) bool) []*corev1.Pod {
	t.Helper()
	ns, name := from.Namespace, from.Name
	seen := []*corev1.Pod{from}
	if done(from) {
		return seen
	}
	ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
	defer cancel()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: from.ResourceVersion,
	})
	if err != nil {
		t.Fatalf("watching pod %s: %v", name, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s/%s did not reach the expected state in %s; seen: %s", ns, name, podTimeout, describe(seen))
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch of pod %s ended early; seen: %s", name, describe(seen))
			}
			if ev.Type == watch.Error {
				t.Fatalf("watching pod %s: %v", name, ev.Object)
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			seen = append(seen, pod)
			if done(pod) {
				return seen
			}
		}
	}
}

func getPod(t *testing.T, c *cluster.Cluster, ns, name string) *corev1.Pod {
	t.Helper()
	pod, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting pod %s: %v", name, err)
	}
	return pod
}

func running(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if !cs.Ready || cs.State.Running == nil {
			return false
		}
	}
	return len(pod.Status.ContainerStatuses) > 0
}

func finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func restartCount(pod *corev1.Pod) int32 {
	if len(pod.Status.ContainerStatuses) == 0 {
		return 0
	}
	return pod.Status.ContainerStatuses[0].RestartCount
}

// phases is the sequence of distinct phases in seen.
func phases(seen []*corev1.Pod) []corev1.PodPhase {
	var out []corev1.PodPhase
	for _, p := range seen {
		if len(out) == 0 || out[len(out)-1] != p.Status.Phase {
			out = append(out, p.Status.Phase)
		}
	}
	return out
}

func describe(seen []*corev1.Pod) string {
	var s string
	for _, p := range seen {
		s += fmt.Sprintf("[%s node=%q ip=%q restarts=%d] ", p.Status.Phase, p.Spec.NodeName, p.Status.PodIP, restartCount(p))
	}
	return s
}
