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

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// SweepTracker follows every replica pod of a namespace's trials, by the
// job-name label trainstep (or `trainstep render`) puts on them, through
// the bench's own watch, stamping each change with the moment it arrived.
// It keeps, per trial, when all its replicas were Running together, and
// checks the trials' gangs as the changes come: a pod bound to a node while
// its trial had fewer live pods than replicas was admitted with half a
// gang, and more live pods than replicas are a duplicate.
type SweepTracker struct {
	mu      sync.Mutex
	gangs   bool // check that no pod is bound before its whole gang exists
	pods    map[types.UID]*trialPod
	trials  map[string]*trialPods
	changed chan struct{}
	err     error
}

// trialPod is one replica pod of a trial as last seen.
type trialPod struct {
	trial, name                       string
	uid                               types.UID
	seen, bound, running, ended, gone time.Time
	// live: not being deleted; countedRunning: counted in its trial's running.
	live, countedRunning bool
	owners               []metav1.OwnerReference
}

// trialPods is what the tracker knows of one trial's replica pods.
type trialPods struct {
	replicas int
	// live pods (not being deleted), of which running now; the most live
	// at once; pods seen ended.
	live, running, mostLive, ended int
	// uids are every pod seen, in order.
	uids []types.UID
	// spans are the stretches during which every replica ran at once.
	spans []span
	// halfAdmitted describes the binds of a pod while the trial had fewer
	// live pods than replicas.
	halfAdmitted []string
}

type span struct{ from, to time.Time }

// TrackSweep starts watching namespace ns's pods for the trials; the watch
// ends with ctx. gangs turns on the check of every bind against its
// trial's live pods, for trials run under a gang.
func TrackSweep(ctx context.Context, cfg *rest.Config, ns string, trials []TrialSpec, gangs bool) (*SweepTracker, error) {
	client, err := kubernetes.NewForConfig(protobufConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("building the sweep tracker's client: %w", err)
	}
	s := &SweepTracker{gangs: gangs, pods: map[types.UID]*trialPod{}, trials: map[string]*trialPods{}, changed: make(chan struct{})}
	for _, t := range trials {
		s.trials[t.Name] = &trialPods{replicas: t.Workers}
	}
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelJobName})
	if err != nil {
		return nil, fmt.Errorf("listing pods of %s: %w", ns, err)
	}
	for i := range list.Items {
		s.observe(watch.Added, &list.Items[i], time.Now())
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = v1alpha1.LabelJobName
			return client.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching pods of %s: %w", ns, err)
	}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			at := time.Now()
			if e.Type == watch.Error {
				s.mu.Lock()
				s.err = fmt.Errorf("watch error: %v", e.Object)
				s.notifyLocked()
				s.mu.Unlock()
				return
			}
			if pod, ok := e.Object.(*corev1.Pod); ok {
				s.observe(e.Type, pod, at)
			}
		}
	}()
	return s, nil
}

// observe folds one change of a pod into its trial.
func (s *SweepTracker) observe(kind watch.EventType, pod *corev1.Pod, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	trial := s.trials[pod.Labels[v1alpha1.LabelJobName]]
	if trial == nil {
		return // not a trial of this sweep
	}
	p := s.pods[pod.UID]
	if p == nil {
		p = &trialPod{trial: pod.Labels[v1alpha1.LabelJobName], name: pod.Name, uid: pod.UID, seen: at, live: true}
		s.pods[pod.UID] = p
		trial.uids = append(trial.uids, pod.UID)
		trial.live++
		trial.mostLive = max(trial.mostLive, trial.live)
	}
	p.owners = pod.OwnerReferences
	if pod.Spec.NodeName != "" && p.bound.IsZero() {
		p.bound = at
		if s.gangs && trial.live < trial.replicas {
			trial.halfAdmitted = append(trial.halfAdmitted, fmt.Sprintf("%s bound while %d of %d pods existed", pod.Name, trial.live, trial.replicas))
		}
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		stampOnce(&p.running, at)
	case corev1.PodSucceeded, corev1.PodFailed:
		if p.ended.IsZero() {
			p.ended = at
			trial.ended++
		}
	}
	if (pod.DeletionTimestamp != nil || kind == watch.Deleted) && p.live {
		p.live = false
		trial.live--
	}
	if kind == watch.Deleted {
		stampOnce(&p.gone, at)
	}
	s.countRunning(trial, p, at)
}

// countRunning keeps the trial's count of pods running now, and its spans
// of every replica running at once.
func (s *SweepTracker) countRunning(trial *trialPods, p *trialPod, at time.Time) {
	runs := !p.running.IsZero() && p.ended.IsZero() && p.live
	switch {
	case runs && !p.countedRunning:
		p.countedRunning = true
		if trial.running++; trial.running == trial.replicas {
			trial.spans = append(trial.spans, span{from: at})
		}
	case !runs && p.countedRunning:
		p.countedRunning = false
		if trial.running == trial.replicas {
			trial.spans[len(trial.spans)-1].to = at
		}
		trial.running--
	}
}

func (s *SweepTracker) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// SweepCounts is the sweep's state as last seen.
type SweepCounts struct {
	// AllRunning trials have had every replica running at once; LivePods
	// are the trials' pods not (being) deleted, Ended the pods seen
	// Succeeded or Failed.
	AllRunning, LivePods, Ended int
}

func (s *SweepTracker) countsLocked() SweepCounts {
	var c SweepCounts
	for _, t := range s.trials {
		if len(t.spans) > 0 {
			c.AllRunning++
		}
		c.LivePods += t.live
		c.Ended += t.ended
	}
	return c
}

// WaitFor blocks until cond holds, ctx ends or the watch fails.
func (s *SweepTracker) WaitFor(ctx context.Context, what string, cond func(SweepCounts) bool) error {
	return waitFor(ctx, what, func() (SweepCounts, <-chan struct{}, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.countsLocked(), s.changed, s.err
	}, cond)
}

// AllRunningAt is when the last trial had every replica running at once;
// zero until every trial has.
func (s *SweepTracker) AllRunningAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	for _, t := range s.trials {
		if len(t.spans) == 0 {
			return time.Time{}
		}
		last = later(last, t.spans[0].from)
	}
	return last
}

// TrialRunning is when one trial had every replica running at once, and
// when that ended, both from a start; To is zero while it goes on.
type TrialRunning struct {
	Trial    string
	From, To time.Duration `json:",omitzero"`
}

// RunningSpans are every trial's stretches with every replica running,
// from start, ordered by when they began.
func (s *SweepTracker) RunningSpans(start time.Time) []TrialRunning {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []TrialRunning
	for name, t := range s.trials {
		for _, sp := range t.spans {
			r := TrialRunning{Trial: name, From: sp.from.Sub(start)}
			if !sp.to.IsZero() {
				r.To = sp.to.Sub(start)
			}
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}

// TrialCheck is what the tracker saw wrong with one trial, if anything.
type TrialCheck struct {
	Trial string
	// Pods is how many distinct pods of the trial were seen, MostLive the
	// most that lived at once, Replicas its job's workers.
	Pods, MostLive, Replicas int
	HalfAdmitted             []string
}

// Duplicated says the trial had more live pods at once than replicas.
func (c TrialCheck) Duplicated() bool { return c.MostLive > c.Replicas }

// Checks are every trial's, by name.
func (s *SweepTracker) Checks() map[string]TrialCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]TrialCheck{}
	for name, t := range s.trials {
		out[name] = TrialCheck{Trial: name, Pods: len(t.uids), MostLive: t.mostLive, Replicas: t.replicas,
			HalfAdmitted: append([]string(nil), t.halfAdmitted...)}
	}
	return out
}

// TrialPod is one pod of a trial as last seen, for the isolation checks.
type TrialPod struct {
	Name   string
	UID    types.UID
	Owners []metav1.OwnerReference
	// Gone is when its deletion was seen; zero while it exists.
	Gone time.Time
}

// PodsOf are the trial's pods, every one seen, in the order they were.
func (s *SweepTracker) PodsOf(trial string) []TrialPod {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.trials[trial]
	if t == nil {
		return nil
	}
	out := make([]TrialPod, 0, len(t.uids))
	for _, uid := range t.uids {
		p := s.pods[uid]
		out = append(out, TrialPod{Name: p.name, UID: p.uid, Owners: p.owners, Gone: p.gone})
	}
	return out
}

// WaitTrialRunning blocks until every replica of the trial has run at
// once, ctx ends or the watch fails.
func (s *SweepTracker) WaitTrialRunning(ctx context.Context, trial string) error {
	for {
		s.mu.Lock()
		t, changed, err := s.trials[trial], s.changed, s.err
		running := t != nil && len(t.spans) > 0
		s.mu.Unlock()
		if running {
			return nil
		}
		if err != nil {
			return fmt.Errorf("waiting for %s to run: %w", trial, err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to run: %w", trial, context.Cause(ctx))
		}
	}
}

// Unfinished says how the trials that have not had every replica running
// stand: how many, the pods they hold, how many of those are bound.
func (s *SweepTracker) Unfinished() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	waiting, live, bound := 0, 0, 0
	for name, t := range s.trials {
		if len(t.spans) > 0 {
			continue
		}
		waiting++
		live += t.live
		for _, uid := range t.uids {
			if p := s.pods[uid]; p.trial == name && p.live && !p.bound.IsZero() {
				bound++
			}
		}
	}
	return fmt.Sprintf("%d trials never had every replica running; they hold %d live pods, %d of them bound", waiting, live, bound)
}
