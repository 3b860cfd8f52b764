package executor

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/trainstep/trainstep/pkg/reconcile"
	"github.com/trainstep/trainstep/pkg/result"
)

// eventRecorder is client-go's event recorder plus a flush: the broadcaster
// writes asynchronously, and a step that exits right after its last event
// would otherwise lose it.
type eventRecorder struct {
	broadcaster record.EventBroadcaster
	recorder    *countingRecorder
	sink        *countingSink
}

func newEventRecorder(client kubernetes.Interface, namespace string) *eventRecorder {
	b := record.NewBroadcaster()
	sink := &countingSink{EventSink: &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events(namespace)}}
	b.StartRecordingToSink(sink)
	return &eventRecorder{
		broadcaster: b,
		recorder:    &countingRecorder{EventRecorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "trainstep"})},
		sink:        sink,
	}
}

// final records the job's end on the owner.
func (e *eventRecorder) final(object runtime.Object, res result.Result) {
	if object == nil {
		return
	}
	switch res.Phase {
	case result.PhaseSucceeded:
		e.recorder.Eventf(object, corev1.EventTypeNormal, reconcile.EventSucceeded, "job %s succeeded", res.JobName)
	case result.PhaseTerminated:
		e.recorder.Eventf(object, corev1.EventTypeNormal, reconcile.EventTerminated, "job %s was stopped; its objects were deleted", res.JobName)
	default:
		e.recorder.Eventf(object, corev1.EventTypeWarning, reconcile.EventFailed, "job %s ended %s: %s: %s", res.JobName, res.Phase, res.Reason, res.Message)
	}
}

// flush waits, for a bounded time, until every recorded event reached the
// API server, then stops the broadcaster.
func (e *eventRecorder) flush(log *zap.Logger) {
	deadline := time.Now().Add(3 * time.Second)
	for e.sink.written.Load() < e.recorder.recorded.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if w, r := e.sink.written.Load(), e.recorder.recorded.Load(); w < r {
		log.Warn("some events were not written before exit", zap.Int64("recorded", r), zap.Int64("written", w))
	}
	e.broadcaster.Shutdown()
}

type countingRecorder struct {
	record.EventRecorder
	recorded atomic.Int64
}

func (r *countingRecorder) Event(object runtime.Object, eventType, reason, message string) {
	r.recorded.Add(1)
	r.EventRecorder.Event(object, eventType, reason, message)
}

func (r *countingRecorder) Eventf(object runtime.Object, eventType, reason, format string, args ...any) {
	r.recorded.Add(1)
	r.EventRecorder.Eventf(object, eventType, reason, format, args...)
}

func (r *countingRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventType, reason, format string, args ...any) {
	r.recorded.Add(1)
	r.EventRecorder.AnnotatedEventf(object, annotations, eventType, reason, format, args...)
}

type countingSink struct {
	record.EventSink
	written atomic.Int64
}

func (s *countingSink) Create(event *corev1.Event) (*corev1.Event, error) {
	defer s.written.Add(1)
	return s.EventSink.Create(event)
}

func (s *countingSink) Update(event *corev1.Event) (*corev1.Event, error) {
	defer s.written.Add(1)
	return s.EventSink.Update(event)
}

func (s *countingSink) Patch(event *corev1.Event, data []byte) (*corev1.Event, error) {
	defer s.written.Add(1)
	return s.EventSink.Patch(event, data)
}
