package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Tracker follows the pods and Services of one namespace through the bench's
// own watches and stamps every change with the moment this process received
// it. Server-side timestamps have one-second resolution, so they are never
// used.
type Tracker struct {
	mu sync.Mutex
	// Objects by UID, so an object deleted and created again under the same
	// name counts twice; the names map to the latest UID.
	pods, services       map[types.UID]*objectTimes
	podUIDs, serviceUIDs map[string]types.UID
	lastGone             time.Time
	changed              chan struct{} // closed and replaced on every change
	watchErr             error
}

// objectTimes is when the tracker first saw an object in each state; zero
// means not (yet).
type objectTimes struct {
	name                        string
	added, running, ended, gone time.Time
	phase                       corev1.PodPhase
}

// Counts is the state of the namespace as the tracker last saw it.
type Counts struct {
	PodsSeen, ServicesSeen int // distinct objects ever seen, deleted ones included
	LivePods, LiveServices int // not yet gone from the API server
	Running                int // pods that have been Running at some point
}

// protobufConfig asks for protobuf, which the API server encodes and this
// process decodes much faster than JSON: the bench's own watches should take
// as little of the shared CPU as possible.
func protobufConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// Track starts watching namespace ns; the watches end with ctx.
func Track(ctx context.Context, cfg *rest.Config, ns string) (*Tracker, error) {
	client, err := kubernetes.NewForConfig(protobufConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("building the tracker's client: %w", err)
	}
	t := &Tracker{
		pods: map[types.UID]*objectTimes{}, services: map[types.UID]*objectTimes{},
		podUIDs: map[string]types.UID{}, serviceUIDs: map[string]types.UID{},
		changed: make(chan struct{}),
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods of %s: %w", ns, err)
	}
	for i := range pods.Items {
		t.observePod(watch.Added, &pods.Items[i], time.Now())
	}
	services, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing services of %s: %w", ns, err)
	}
	for i := range services.Items {
		t.observeService(watch.Added, &services.Items[i], time.Now())
	}
	podWatch, err := watchtools.NewRetryWatcherWithContext(ctx, pods.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching pods of %s: %w", ns, err)
	}
	serviceWatch, err := watchtools.NewRetryWatcherWithContext(ctx, services.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Services(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching services of %s: %w", ns, err)
	}
	go t.consume(podWatch, func(e watch.Event, at time.Time) {
		if pod, ok := e.Object.(*corev1.Pod); ok {
			t.observePod(e.Type, pod, at)
		}
	})
	go t.consume(serviceWatch, func(e watch.Event, at time.Time) {
		if svc, ok := e.Object.(*corev1.Service); ok {
			t.observeService(e.Type, svc, at)
		}
	})
	return t, nil
}

func (t *Tracker) consume(w *watchtools.RetryWatcher, observe func(watch.Event, time.Time)) {
	defer w.Stop()
	for e := range w.ResultChan() {
		at := time.Now()
		if e.Type == watch.Error {
			t.mu.Lock()
			t.watchErr = fmt.Errorf("watch error: %v", e.Object)
			t.notifyLocked()
			t.mu.Unlock()
			return
		}
		observe(e, at)
	}
}

func (t *Tracker) observePod(kind watch.EventType, pod *corev1.Pod, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := record(t.pods, t.podUIDs, &pod.ObjectMeta, at)
	rec.phase = pod.Status.Phase
	switch pod.Status.Phase {
	case corev1.PodRunning:
		stampOnce(&rec.running, at)
	case corev1.PodSucceeded, corev1.PodFailed:
		stampOnce(&rec.ended, at)
	}
	if kind == watch.Deleted {
		stampOnce(&rec.gone, at)
		t.lastGone = at
	}
	t.notifyLocked()
}

func (t *Tracker) observeService(kind watch.EventType, svc *corev1.Service, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := record(t.services, t.serviceUIDs, &svc.ObjectMeta, at)
	if kind == watch.Deleted {
		stampOnce(&rec.gone, at)
		t.lastGone = at
	}
	t.notifyLocked()
}

// record returns the object's times, creating them when the object is new.
func record(m map[types.UID]*objectTimes, uids map[string]types.UID, meta *metav1.ObjectMeta, at time.Time) *objectTimes {
	rec, ok := m[meta.UID]
	if !ok {
		rec = &objectTimes{name: meta.Name, added: at}
		m[meta.UID] = rec
		uids[meta.Name] = meta.UID
	}
	return rec
}

func stampOnce(field *time.Time, at time.Time) {
	if field.IsZero() {
		*field = at
	}
}

func (t *Tracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// Counts returns the current counts.
func (t *Tracker) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.countsLocked()
}

func (t *Tracker) countsLocked() Counts {
	c := Counts{PodsSeen: len(t.pods), ServicesSeen: len(t.services)}
	for _, p := range t.pods {
		if p.gone.IsZero() {
			c.LivePods++
		}
		if !p.running.IsZero() {
			c.Running++
		}
	}
	for _, s := range t.services {
		if s.gone.IsZero() {
			c.LiveServices++
		}
	}
	return c
}

// WaitFor blocks until cond holds for the counts, ctx ends or a watch fails.
func (t *Tracker) WaitFor(ctx context.Context, what string, cond func(Counts) bool) error {
	return waitFor(ctx, what, func() (Counts, <-chan struct{}, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.countsLocked(), t.changed, t.watchErr
	}, cond)
}

// waitFor blocks until cond holds for what snapshot reads (the counts, the
// channel closed on their next change and the watch's error, read together
// under the tracker's lock), ctx ends or the watch fails.
func waitFor[C any](ctx context.Context, what string, snapshot func() (C, <-chan struct{}, error), cond func(C) bool) error {
	for {
		counts, changed, err := snapshot()
		if cond(counts) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s (last seen %+v): %w", what, counts, context.Cause(ctx))
		}
	}
}

// WaitPodEnded blocks until the named pod has been seen Succeeded or Failed
// and returns when that was first seen.
func (t *Tracker) WaitPodEnded(ctx context.Context, name string) (time.Time, error) {
	for {
		t.mu.Lock()
		rec, changed, err := t.pods[t.podUIDs[name]], t.changed, t.watchErr
		var ended time.Time
		if rec != nil {
			ended = rec.ended
		}
		t.mu.Unlock()
		if !ended.IsZero() {
			return ended, nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("waiting for pod %s to end: %w", name, err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for pod %s to end: %w", name, context.Cause(ctx))
		}
	}
}

// CreatedAt is when the pods-th pod and the services-th Service had both been seen.
func (t *Tracker) CreatedAt(pods, services int) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	podAt := nth(t.pods, pods, func(o *objectTimes) time.Time { return o.added })
	serviceAt := nth(t.services, services, func(o *objectTimes) time.Time { return o.added })
	if podAt.IsZero() || serviceAt.IsZero() {
		return time.Time{}
	}
	return later(podAt, serviceAt)
}

// Recreated lists the names under which more than one pod or Service was
// seen: objects deleted and created again during the run.
func (t *Tracker) Recreated() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for kind, m := range map[string]map[types.UID]*objectTimes{"pod": t.pods, "service": t.services} {
		perName := map[string]int{}
		for _, rec := range m {
			perName[rec.name]++
		}
		for name, n := range perName {
			if n > 1 {
				names = append(names, fmt.Sprintf("%s %s (%d objects)", kind, name, n))
			}
		}
	}
	sort.Strings(names)
	return names
}

// FirstCreatedAt is when the first pod or Service was seen.
func (t *Tracker) FirstCreatedAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	pod := nth(t.pods, 1, func(o *objectTimes) time.Time { return o.added })
	svc := nth(t.services, 1, func(o *objectTimes) time.Time { return o.added })
	switch {
	case pod.IsZero():
		return svc
	case svc.IsZero() || pod.Before(svc):
		return pod
	}
	return svc
}

// RunningAt is when the n-th pod was first seen Running.
func (t *Tracker) RunningAt(n int) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return nth(t.pods, n, func(o *objectTimes) time.Time { return o.running })
}

// LastGoneAt is when the last deletion was seen.
func (t *Tracker) LastGoneAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastGone
}

// nth returns the n-th earliest non-zero time among the objects, or zero
// when fewer than n have one.
func nth(m map[types.UID]*objectTimes, n int, field func(*objectTimes) time.Time) time.Time {
	var times []time.Time
	for _, o := range m {
		if at := field(o); !at.IsZero() {
			times = append(times, at)
		}
	}
	if n <= 0 || len(times) < n {
		return time.Time{}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	return times[n-1]
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
