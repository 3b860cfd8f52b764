package executor

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/clock"

	"github.com/trainstep/trainstep/pkg/reconcile"
	"github.com/trainstep/trainstep/pkg/result"
)

// client-go's EventCorrelator lets one source write eventSpamBurst events
// about one object, then one every 1/eventSpamQPS seconds, and drops the
// rest before they reach the sink (NewEventCorrelator's defaults, kept).
// The recorder applies that filter itself, with client-go's own
// EventSourceObjectSpamFilter, before it counts an event, so that flush
// waits only for events that will be written; the correlator's filter is
// given a key per observation, so it drops nothing more.
const (
	eventSpamBurst     = 25
	eventSpamQPS       = 1. / 300.
	eventSpamCacheSize = 4096
)

// eventRecorder is client-go's event recorder plus a flush: the broadcaster
// writes asynchronously, and a step that exits right after its last event
// would otherwise lose it.
type eventRecorder struct {
	broadcaster record.EventBroadcaster
	recorder    *countingRecorder
	sink        *countingSink
}

func newEventRecorder(events typedcorev1.EventsGetter, namespace string) *eventRecorder {
	b := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{SpamKeyFunc: observationKey}))
	sink := &countingSink{EventSink: &typedcorev1.EventSinkImpl{Interface: events.Events(namespace)}}
	b.StartRecordingToSink(sink)
	source := corev1.EventSource{Component: "trainstep"}
	return &eventRecorder{
		broadcaster: b,
		recorder: &countingRecorder{
			EventRecorder: b.NewRecorder(scheme.Scheme, source),
			source:        source,
			spam:          record.NewEventSourceObjectSpamFilter(eventSpamCacheSize, eventSpamBurst, eventSpamQPS, clock.RealClock{}, spamKey),
		},
		sink: sink,
	}
}

// observationKey names one observation of an event: a new event has a
// unique name, and each repeat of it (written as a patch) a higher count.
// No key is seen twice, so the correlator's token bucket for it is full.
func observationKey(event *corev1.Event) string {
	return event.Namespace + "/" + event.Name + "/" + strconv.Itoa(int(event.Count))
}

// spamKey groups events as client-go's correlator does by default: by
// source, involved object and type.
func spamKey(event *corev1.Event) string {
	o := event.InvolvedObject
	return strings.Join([]string{event.Source.Component, event.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, event.Type}, "")
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
	if dropped := e.recorder.dropped.Load(); dropped > 0 {
		log.Info("some events were not sent: client-go lets one source send 25 events about an object, then one every 5 minutes",
			zap.Int64("sent", e.recorder.recorded.Load()), zap.Int64("notSent", dropped))
	}
	e.broadcaster.Shutdown()
}

// countingRecorder counts the events it hands to client-go's recorder, and
// those its spam filter drops instead.
type countingRecorder struct {
	record.EventRecorder
	source corev1.EventSource
	// spamMu serializes the filter, which client-go calls from one
	// goroutine only; the reconciler records from several.
	spamMu            sync.Mutex
	spam              *record.EventSourceObjectSpamFilter
	recorded, dropped atomic.Int64
}

func (r *countingRecorder) Event(object runtime.Object, eventType, reason, message string) {
	if r.take(object, eventType) {
		r.EventRecorder.Event(object, eventType, reason, message)
	}
}

func (r *countingRecorder) Eventf(object runtime.Object, eventType, reason, format string, args ...any) {
	if r.take(object, eventType) {
		r.EventRecorder.Eventf(object, eventType, reason, format, args...)
	}
}

func (r *countingRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventType, reason, format string, args ...any) {
	if r.take(object, eventType) {
		r.EventRecorder.AnnotatedEventf(object, annotations, eventType, reason, format, args...)
	}
}

// take reports whether an event about object passes the spam filter, and
// counts it. An event client-go's recorder will refuse (no reference to
// the object, an unknown type) passes uncounted, for the recorder to log.
func (r *countingRecorder) take(object runtime.Object, eventType string) bool {
	ref, err := reference.GetReference(scheme.Scheme, object)
	if err != nil || !util.ValidateEventType(eventType) {
		return true
	}
	r.spamMu.Lock()
	filtered := r.spam.Filter(&corev1.Event{InvolvedObject: *ref, Source: r.source, Type: eventType})
	r.spamMu.Unlock()
	if filtered {
		r.dropped.Add(1)
		return false
	}
	r.recorded.Add(1)
	return true
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
