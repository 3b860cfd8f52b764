package executor_test

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// TestEventsBeyondTheSpamFilterAreNotWaitedFor runs a job whose worker is
// recreated 30 times: more events on the owner than client-go's spam
// filter lets through (25 at once). The run must not wait for, or warn
// about, the events that filter drops, and what it sent is on the owner.
func TestEventsBeyondTheSpamFilterAreNotWaitedFor(t *testing.T) {
	t.Parallel()
	c := cluster.Get(t)
	ns := c.Namespace(t)
	owner := ownerPod(t, c, ns, "step")
	job := newJob("spam", v1alpha1.FrameworkTensorFlow).
		replicas(worker, 1, exitsAfter("0s", 75)).restartPolicy(worker, v1alpha1.RestartPolicyExitCode, 75).
		with(func(j *v1alpha1.TrainJob) { limit := int32(30); j.Spec.RunPolicy.BackoffLimit = &limit })
	core, logs := observer.New(zapcore.InfoLevel)

	out := runJob(t, c, ns, job.yaml(t), func(cfg *executor.Config) {
		cfg.OwnerPod, cfg.OwnerUID = owner.Name, string(owner.UID)
		cfg.Logger = zap.New(core)
	})

	if out.res.Phase != result.PhaseFailed || out.res.Restarts != 30 {
		t.Fatalf("phase %s (%s) after %d restarts, want Failed after 30", out.res.Phase, out.res.Message, out.res.Restarts)
	}
	if warned := logs.FilterMessage("some events were not written before exit"); warned.Len() > 0 {
		t.Errorf("the run warned that events were not written: %v", warned.All()[0].ContextMap())
	}
	notSent := logs.FilterMessage("some events were not sent: client-go lets one source send 25 events about an object, then one every 5 minutes").All()
	if len(notSent) != 1 {
		t.Fatalf("the run did not say that events were not sent")
	}
	fields := notSent[0].ContextMap()
	sent, dropped := fields["sent"].(int64), fields["notSent"].(int64)
	events, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + owner.Name})
	if err != nil {
		t.Fatal(err)
	}
	var written int64
	for _, e := range events.Items {
		if e.Source.Component == "trainstep" { // the scheduler writes about the owner pod too
			written += int64(e.Count)
		}
	}
	// 31 Normal events (Created, 30 Restarted) of which client-go sends
	// 25, and one Warning (Failed): the filter keys by type too.
	if sent != 26 || dropped != 6 || written != sent {
		t.Errorf("sent %d events and dropped %d (want 26 and 6), the owner has %d from trainstep", sent, dropped, written)
	}
}
