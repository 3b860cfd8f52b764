package gang_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/gang"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// workloadPriorityClass makes a Kueue WorkloadPriorityClass for the test.
func workloadPriorityClass(t *testing.T, c *cluster.Cluster, name string, value int64) string {
	t.Helper()
	wpc := &unstructured.Unstructured{Object: map[string]any{"kind": "WorkloadPriorityClass", "metadata": map[string]any{"name": name}, "value": value}}
	wpc.SetAPIVersion(cluster.KueueWorkloadPriorityClasses.GroupVersion().String())
	wpcs := dynamicClient(t, c).Resource(cluster.KueueWorkloadPriorityClasses)
	if _, err := wpcs.Create(context.Background(), wpc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating WorkloadPriorityClass %s: %v", name, err)
	}
	t.Cleanup(func() { _ = wpcs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// labelledPyTorchJob is a Kubeflow PyTorchJob, a Master and a Worker of one
// GPU each on pool's nodes, that says nothing of gangs or queues but
// Kueue's labels on its metadata, as a team's manifest for Kueue's Kubeflow
// integration does.
func labelledPyTorchJob(name, pool, queue, priority string) []byte {
	replica := func(rt string) string {
		return fmt.Sprintf(`    %s:
      replicas: 1
      template:
        spec:
          nodeSelector: {%s: %s}
          tolerations: [{key: %s, operator: Equal, value: %s, effect: NoSchedule}]
          containers:
          - name: pytorch
            image: registry.example/train:1
            resources: {requests: {cpu: 100m, %s: "1"}, limits: {%s: "1"}}
`, rt, poolKey, pool, poolKey, pool, cluster.ResourceGPU, cluster.ResourceGPU)
	}
	return []byte(fmt.Sprintf(`apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: %s
  labels: {%s: %s, %s: %s}
spec:
  runPolicy: {cleanPodPolicy: All}
  pytorchReplicaSpecs:
`, name, v1alpha1.LabelKueueQueueName, queue, v1alpha1.LabelKueuePriorityClass, priority) + replica("Master") + replica("Worker"))
}

// A PyTorchJob carrying only Kueue's labels goes into that LocalQueue, as
// Kueue's Kubeflow integration would put it there: while another job (a
// TrainJob with a higher workloadPriorityClass) holds the ClusterQueue's
// quota its pods are created and held by Kueue's gate, bound to nothing,
// its Workload pending on quota at the labelled WorkloadPriorityClass; once
// the quota frees up it is admitted as a whole and runs.
func TestRealGangKueueTakesAPyTorchJobsQueueLabels(t *testing.T) {
	c := cluster.Get(t)
	c.StartKueue(t)
	ns := c.Namespace(t)
	const pool, gpus = "kueue-labels", 2
	addPool(t, c, pool, 2, gpus) // room for both jobs
	kueueQueues(t, c, ns, gpus)  // quota for one
	dyn := dynamicClient(t, c)
	// first runs above second, so that second waits for its quota rather
	// than preempting it.
	high, low := workloadPriorityClass(t, c, ns+"-high", 1000), workloadPriorityClass(t, c, ns+"-low", 100)
	binds := watchBinds(t, c, ns)

	sp := &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangKueue, Queue: kueueLocalQueue, WorkloadPriorityClass: high, ScheduleTimeoutSeconds: ptr.To[int32](150)}
	first := startRun(t, c, ns, gpuJob("first", pool, gpus, sp))
	testutil.Eventually(t, time.Minute, "first running", func() bool {
		return countPods(jobPods(t, c, ns, "first"), running) == gpus
	})
	second := startManifest(t, c, ns, "second", labelledPyTorchJob("second", pool, kueueLocalQueue, low))
	testutil.Eventually(t, time.Minute, "second's pods created, held by Kueue", func() bool {
		pods := jobPods(t, c, ns, "second")
		return len(pods) == 2 && countPods(pods, kueueGated) == 2
	})
	for _, p := range jobPods(t, c, ns, "second") {
		if p.Labels[gang.KueueQueueLabel] != kueueLocalQueue || p.Labels[gang.KueuePriorityClassLabel] != low || p.Labels[gang.KueuePodGroupLabel] != "second" {
			t.Errorf("%s: labels %v, want Kueue's queue %s, priority class %s and pod group second", p.Name, p.Labels, kueueLocalQueue, low)
		}
	}
	var workload *unstructured.Unstructured
	testutil.Eventually(t, 30*time.Second, "second's Workload pending on quota", func() bool {
		wl, err := dyn.Resource(cluster.KueueWorkloads).Namespace(ns).Get(context.Background(), "second", metav1.GetOptions{})
		workload = wl
		return err == nil && gang.KueueWorkloadSays(wl) != ""
	})
	ref, _, _ := unstructured.NestedStringMap(workload.Object, "spec", "priorityClassRef")
	priority, _, _ := unstructured.NestedInt64(workload.Object, "spec", "priority")
	if ref["kind"] != "WorkloadPriorityClass" || ref["name"] != low || priority != 100 {
		t.Errorf("second's Workload has priorityClassRef %v and priority %d, want WorkloadPriorityClass %s at 100", ref, priority, low)
	}
	if b := binds.of("second"); len(b) != 0 {
		t.Fatalf("second got %d pods bound while first held the quota", len(b))
	}

	exitAll(t, c, ns, "first")
	if res := first.wait(t); res.Phase != result.PhaseSucceeded {
		t.Fatalf("first ended %s/%s: %s", res.Phase, res.Reason, res.Message)
	}
	testutil.Eventually(t, time.Minute, "second admitted and running", func() bool {
		return countPods(jobPods(t, c, ns, "second"), running) == 2
	})
	exitAll(t, c, ns, "second")
	if res := second.wait(t); res.Phase != result.PhaseSucceeded || res.Restarts != 0 {
		t.Fatalf("second ended %s/%s with %d restarts: %s", res.Phase, res.Reason, res.Restarts, res.Message)
	}
}
