package reconcile

import (
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// The control plane's faults and the outside world's, beside the job's own:
// kube-apiserver restarting (every request refused, every watch broken,
// the informers relisting once it answers), etcd compacted under the open
// watches (410 Gone: each informer relists), API Priority and Fairness
// throttling every request with 429s, an outside delete of the job's
// Service or ConfigMap, and the workflow stopped. A relist replaces each
// cache with what the API server holds, as client-go's reflector does:
// whatever changed while no watch delivered arrives folded, and an object
// gone meanwhile arrives as a tombstone carrying what the cache last held
// of it, not its final state.

// drawControlPlaneFaults draws up to two of them within the script (from a
// stream of their own, so that the job's own faults stay as drawn).
func drawControlPlaneFaults(seed uint64, last time.Duration) []fault {
	y := rand.New(rand.NewPCG(seed, 0x46))
	var out []fault
	for range y.IntN(3) {
		f := fault{at: time.Duration(5+y.IntN(int((last+30*time.Second)/time.Second))) * time.Second}
		switch k := y.IntN(100); {
		case k < 30:
			// Most restarts take seconds; the last is past the API timeout.
			f.kind, f.lasts = faultAPIRestart, []time.Duration{3 * time.Second, 10 * time.Second, 25 * time.Second, 100 * time.Second}[y.IntN(4)]
		case k < 50:
			f.kind = faultCompact
		case k < 70:
			f.kind, f.lasts = faultThrottle, time.Duration(5+y.IntN(55))*time.Second
		case k < 95:
			f.kind, f.replica = faultRemove, []string{"the ledger's Service", "the job's ConfigMap"}[y.IntN(2)]
		default:
			f.kind = faultStop
		}
		out = append(out, f)
	}
	return out
}

// injectControlPlane carries one of them out.
func (r *simRun) injectControlPlane(f *fault) {
	w := r.w
	switch f.kind {
	case faultAPIRestart:
		w.outageUntil = w.now().Add(f.lasts)
		w.breakWatches(f.lasts + time.Duration(500+w.rng.IntN(1500))*time.Millisecond)
	case faultCompact:
		w.breakWatches(time.Duration(w.rng.IntN(1000)) * time.Millisecond)
	case faultThrottle:
		w.apiFaults = append(w.apiFaults, apiFault{from: w.now(), until: w.now().Add(f.lasts), code: 429, reads: true})
	case faultRemove:
		r.removeFromOutside(f.replica)
	case faultStop:
		r.stopStep()
	case faultDrainStep:
		r.drainStep()
	}
}

// removeFromOutside deletes the ledger's Service or the job's ConfigMap as
// someone outside trainstep would.
func (r *simRun) removeFromOutside(what string) {
	w := r.w
	gvr, name := configMapsGVR, ""
	if what == "the ledger's Service" {
		gvr = servicesGVR
		if s := r.cur; s != nil && s.ctrl != nil {
			name = s.ctrl.ledgerService()
		}
	} else if objs := w.jobObjects(configMapsGVR); len(objs) > 0 {
		name = objs[0].GetName()
	}
	if name == "" {
		return
	}
	obj, err := w.tracker.Get(gvr, simNamespace, name)
	if err != nil {
		return
	}
	if err := w.tracker.Delete(gvr, simNamespace, name); err == nil {
		w.logf("removed from outside: %s %s", gvr.Resource, name)
		w.emit(gvr, watch.Deleted, obj)
	}
}

// whenAnswering runs do after grace, as a controller of
// kube-controller-manager (or one outside it, deleting a Node) would: when
// that comes while kube-apiserver is away, do waits until it answers, and
// grace again from there. Nothing of theirs reaches the API server
// meanwhile, and a kube-controller-manager whose lease lapsed starts over,
// its node monitor's grace and the pod garbage collector's quarantine
// counted from when it sees the nodes again.
func (w *simWorld) whenAnswering(grace time.Duration, what string, do func()) {
	w.after(grace, 0, what, func() {
		if w.outage() {
			w.after(w.outageUntil.Sub(w.now()), 0, what+" once kube-apiserver answers", func() { w.whenAnswering(grace, what, do) })
			return
		}
		do()
	})
}

// breakWatches ends every watch of the job's informers: the events on their
// way are lost, and nothing is delivered until they relist, after d.
func (w *simWorld) breakWatches(d time.Duration) {
	if w.ctrl == nil || w.inbox == nil {
		return
	}
	w.logf("every watch breaks; the informers relist in %s", d)
	if w.onBlind != nil {
		w.onBlind()
	}
	w.inbox = map[schema.GroupVersionResource][]pendingEvent{}
	w.watchBroken = true
	w.after(d, w.gen, "relist", w.relist)
}

// relist lists every resource of the job again and replaces the caches;
// while the API server is away the List fails, and the reflector tries
// again a second or so later.
func (w *simWorld) relist() {
	if w.ctrl == nil {
		return // the step whose informers broke is gone
	}
	if w.outage() {
		w.after(time.Duration(800+w.rng.IntN(800))*time.Millisecond, w.gen, "relist", w.relist)
		return
	}
	w.watchBroken = false
	if w.onRelist != nil {
		w.onRelist()
	}
	for _, gvr := range simResources {
		inf := w.informers[gvr]
		if inf == nil {
			continue
		}
		var listed []runtime.Object
		for _, m := range w.jobObjects(gvr) {
			listed = append(listed, m.(runtime.Object))
		}
		w.logf("relist %s: %d objects", gvr.Resource, len(listed))
		inf.replace(listed)
	}
}

// replace is a relist's Replace, as DeltaFIFO hands it to the handlers: an
// update (or an add) of each object listed, then, for each cached object
// not listed, a delete whose final state is unknown: a tombstone carrying
// the object as the cache last held it.
func (i *simInformer) replace(listed []runtime.Object) {
	seen := map[string]bool{}
	for _, o := range listed {
		obj := i.slim(o)
		key, _ := cache.MetaNamespaceKeyFunc(obj)
		seen[key] = true
		old, exists, _ := i.indexer.GetByKey(key)
		_ = i.indexer.Update(obj)
		for _, h := range i.handlers {
			if exists {
				h.OnUpdate(old, obj)
			} else {
				h.OnAdd(obj, false)
			}
		}
	}
	for _, old := range i.indexer.List() {
		key, _ := cache.MetaNamespaceKeyFunc(old)
		if seen[key] {
			continue
		}
		_ = i.indexer.Delete(old)
		for _, h := range i.handlers {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: old})
		}
	}
}
