package executor

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/trainstep/trainstep/pkg/reconcile"
)

// TestFlushWaitsOnlyForEventsThatCanBeWritten records more events about
// one object than client-go's spam filter lets through (25, then one
// every 5 minutes), as a run with many restarts does: the flush must
// account for every event the recorder took, and not wait for, or warn
// about, the ones that were never going to be written.
func TestFlushWaitsOnlyForEventsThatCanBeWritten(t *testing.T) {
	const namespace, total = "team", 40
	client := fake.NewClientset()
	owner := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "step", UID: "step-uid"}}
	events := newEventRecorder(client.CoreV1(), namespace)
	for i := range total {
		// Twelve replicas taking turns: repeated messages are counted on
		// one event, similar ones aggregated, as client-go does.
		events.recorder.Eventf(owner, corev1.EventTypeWarning, reconcile.EventRestarted, "replica worker-%d exited with code 1; restarting it", i%12)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	events.flush(zap.New(core))

	for _, e := range logs.All() {
		t.Errorf("flush logged %s %q %v", e.Level, e.Message, e.ContextMap())
	}
	accepted := events.recorder.recorded.Load()
	if accepted != 25 {
		t.Errorf("the recorder took %d of %d events, want the 25 client-go's spam filter lets through at once", accepted, total)
	}
	list, err := client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var written int64
	for _, e := range list.Items {
		if e.InvolvedObject.UID != owner.UID {
			t.Errorf("event %s is about %s, not the owner", e.Name, e.InvolvedObject.Name)
		}
		written += int64(e.Count)
	}
	if written != accepted {
		t.Errorf("the API server counts %d events in %d objects, the recorder took %d", written, len(list.Items), accepted)
	}
}
