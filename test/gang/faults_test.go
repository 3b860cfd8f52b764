package gang_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/internal/testutil"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// The built-in gang's writes fail once each: a 500 on lifting the gates and
// a 500 on giving the pods back after an attempt that did not fit. Both are
// sent again, and the gang starts the job once room frees.
func TestBuiltinGangRidesOutFailedUngatesAndReleases(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	addPool(t, c, "gangfault", 1, 2) // room for 2 of the job's 4 pods
	proxy := c.FaultProxy(t)
	var ungatesFailed, releasesFailed atomic.Int32
	proxy.SetFault(func(_ *http.Request, call cluster.Call) cluster.Fault {
		switch {
		case call.Verb == "patch" && call.Resource == "pods" && ungatesFailed.CompareAndSwap(0, 1):
			return cluster.Fault{Status: http.StatusInternalServerError}
		case call.Verb == "delete" && call.Resource == "pods" && releasesFailed.CompareAndSwap(0, 1):
			return cluster.Fault{Status: http.StatusInternalServerError}
		}
		return cluster.Fault{}
	})
	const timeout = 4
	job := gpuJob("gangfault", "gangfault", 4, &v1alpha1.SchedulingPolicy{Gang: v1alpha1.GangBuiltin,
		ScheduleTimeoutSeconds: ptr.To[int32](timeout), MaxScheduleAttempts: ptr.To[int32](20)})
	r := startRun(t, c, ns, job, func(cfg *executor.Config) { cfg.Kubeconfig = proxy.Kubeconfig })
	testutil.Eventually(t, time.Minute, "an attempt to be released after a failed release", func() bool {
		return releasesFailed.Load() == 1 && proxy.Count("delete", "pods") >= 2
	})
	if ungatesFailed.Load() != 1 {
		t.Fatal("no ungate was failed: the test did not inject what it claims")
	}
	addNode(t, c, "gangfault", "gangfault-extra", 2) // room frees: 4 in all
	testutil.Eventually(t, 2*time.Minute, "all 4 pods running together", func() bool {
		return countPods(jobPods(t, c, ns, "gangfault"), running) == 4
	})
	exitAll(t, c, ns, "gangfault")
	res := r.wait(t)
	if res.Phase != result.PhaseSucceeded || res.Restarts != 0 {
		t.Fatalf("ended %s/%s with %d restarts (%s), want Succeeded with none", res.Phase, res.Reason, res.Restarts, res.Message)
	}
}

// addNode adds one more node with gpus GPUs to pool.
func addNode(t *testing.T, c *cluster.Cluster, pool, name string, gpus int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.AddNode(ctx, name, cluster.NodeCapacity("8", "32Gi", 110, gpus),
		cluster.WithNodeLabels(map[string]string{poolKey: pool}),
		cluster.WithNodeTaints(corev1.Taint{Key: poolKey, Value: pool, Effect: corev1.TaintEffectNoSchedule}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}
