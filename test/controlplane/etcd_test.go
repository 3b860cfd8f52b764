package controlplane_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// etcd compacted under the run's open watches, which then break (the
// connection drops): each informer starts its watch again from the last
// revision it saw, which etcd no longer holds; kube-apiserver answers 410
// Gone and the informer relists. A worker that fails while the watches are
// down is seen through the relist and counted once; nothing else is
// recreated.
func TestEtcdCompactedUnderOpenWatches(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	const job = "compacted"
	history := recordPods(t, c, ns, job)
	proxy := c.FaultProxy(t)
	cfg := config(t, c, ns, psJob(t, job, 2, 40*time.Second), proxy.Kubeconfig)
	wait := start(t, cfg)
	waitRunning(t, c, ns, job, 3)
	lists := proxy.Count("list", "pods")
	revision := c.CompactEtcd(t)
	proxy.Down()
	// worker-1 is killed (137, retried) while no watch delivers.
	patch := []byte(`{"metadata":{"annotations":{"` + cluster.AnnotationExitAfter + `":"0s","` + cluster.AnnotationExitCode + `":"137"}}}`)
	if _, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), job+"-worker-1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	proxy.Up(t)
	o := wait()
	checkEnded(t, c, ns, job, cfg, o, result.PhaseSucceeded, result.ReasonSucceeded, "1")
	if relists := proxy.Count("list", "pods") - lists; relists < 1 {
		t.Errorf("no List of pods after etcd was compacted to revision %d: the informer did not relist", revision)
	}
	want := map[string]bool{job + "-worker-1 (2 instances)": true}
	for _, d := range history.duplicates() {
		if !want[d] {
			t.Errorf("replica recreated: %s", d)
		}
	}
}
