package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// A launch is timed from an idle machine: after the previous run the
// control plane goes on working for seconds (the garbage collectors, the
// namespace controller, the endpoint controllers, etcd), and whichever
// side started into that work was measured slower for it.
const (
	// IdleBusyBelow is the share of all cores the machine may keep busy
	// and still count as idle.
	IdleBusyBelow = 0.25
	// IdleFor is how long it must have stayed so, in IdleSample steps.
	IdleFor    = time.Second
	IdleSample = 250 * time.Millisecond
	// IdleLimit bounds the wait: a machine that never quiets down (another
	// tenant) still gets measured, and the wait says so.
	IdleLimit = 30 * time.Second
	// NamespacesLimit bounds the wait for namespaces being deleted.
	NamespacesLimit = 2 * time.Minute
)

// CollectAPIServerGarbage has kube-apiserver run a garbage collection now:
// its heap profile, asked for with gc=1, collects first. After a launch of
// hundreds of pods its heap holds hundreds of megabytes, and a collection
// costs seconds of CPU on these cores; without this, whichever side's launch
// a collection fell into was measured slower for it. It needs kube-apiserver
// run with --profiling (the default; the test cluster's) and an admin's
// rights on /debug/pprof.
func CollectAPIServerGarbage(ctx context.Context, client rest.Interface) error {
	err := client.Get().AbsPath("/debug/pprof/heap").Param("gc", "1").Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("asking kube-apiserver for a garbage collection: %w", err)
	}
	return nil
}

// Quiesce waits until no namespace is being deleted, collects
// kube-apiserver's garbage, then waits for an idle machine: the state every
// measured launch starts from. client is an admin's core/v1 REST client.
// It returns the LaunchMeter of the launch that follows, which reads
// kube-apiserver's metrics once the namespaces are gone: the namespace
// controller's deletes of an earlier run's objects (its Events above all, a
// Scheduled and a Started per pod, two writes per replica) are not the
// launch's writes, and read before the wait they were counted as its
// Events. It reads them before the idle wait, since reading them is work of
// its own.
func Quiesce(ctx context.Context, client rest.Interface) (*LaunchMeter, IdleWait, error) {
	deleting, err := WaitNamespacesDeleted(ctx, client)
	if err != nil {
		return nil, IdleWait{}, err
	}
	meter, err := NewLaunchMeter(ctx, client)
	if err != nil {
		return nil, IdleWait{}, err
	}
	if err := CollectAPIServerGarbage(ctx, client); err != nil {
		return nil, IdleWait{}, err
	}
	w, err := WaitIdle(ctx)
	w.Namespaces = deleting
	return meter, w, err
}

// NamespacesWait is what one wait for namespaces being deleted saw.
type NamespacesWait struct {
	Waited time.Duration
	// Left is how many were still being deleted when NamespacesLimit
	// ended the wait.
	Left int
}

// WaitNamespacesDeleted waits until no namespace is being deleted, at most
// NamespacesLimit. A namespace's deletion goes on after its delete was
// answered: the namespace controller then deletes what is left in it, the
// Events above all (a Scheduled and a Started for every pod), for seconds
// after a launch of 512. A launch measured meanwhile shared etcd with those
// deletes.
func WaitNamespacesDeleted(ctx context.Context, client rest.Interface) (NamespacesWait, error) {
	began := time.Now()
	for {
		var namespaces corev1.NamespaceList
		if err := client.Get().Resource("namespaces").Do(ctx).Into(&namespaces); err != nil {
			return NamespacesWait{}, fmt.Errorf("listing namespaces: %w", err)
		}
		deleting := 0
		for _, ns := range namespaces.Items {
			if ns.DeletionTimestamp != nil {
				deleting++
			}
		}
		waited := time.Since(began)
		if deleting == 0 {
			return NamespacesWait{Waited: waited}, nil
		}
		if waited >= NamespacesLimit {
			return NamespacesWait{Waited: waited, Left: deleting}, nil
		}
		select {
		case <-ctx.Done():
			return NamespacesWait{}, ctx.Err()
		case <-time.After(IdleSample):
		}
	}
}

func (w NamespacesWait) String() string {
	if w.Left > 0 {
		return fmt.Sprintf("%d namespaces still being deleted after %s", w.Left, w.Waited.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("namespaces deleted after %s", w.Waited.Round(100*time.Millisecond))
}

// IdleWait is what one wait for an idle machine saw.
type IdleWait struct {
	Waited time.Duration
	// Idle is false when IdleLimit ended the wait first.
	Idle bool
	// Busy is the share of all cores busy in the last sample.
	Busy float64
	// Namespaces is the wait for namespaces being deleted before it (Quiesce).
	Namespaces NamespacesWait
}

func (w IdleWait) String() string {
	idle := fmt.Sprintf("idle after %s", w.Waited.Round(100*time.Millisecond))
	if !w.Idle {
		idle = fmt.Sprintf("still %.0f%% busy after %s", 100*w.Busy, w.Waited.Round(100*time.Millisecond))
	}
	return w.Namespaces.String() + ", then " + idle
}

// WaitIdle waits until the machine's cores have been less than
// IdleBusyBelow busy for IdleFor, or for IdleLimit.
func WaitIdle(ctx context.Context) (IdleWait, error) {
	began := time.Now()
	prev, err := readCPUTimes()
	if err != nil {
		return IdleWait{}, err
	}
	quietSince := time.Time{}
	ticker := time.NewTicker(IdleSample)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return IdleWait{}, ctx.Err()
		case <-ticker.C:
		}
		now, err := readCPUTimes()
		if err != nil {
			return IdleWait{}, err
		}
		busy := now.busySince(prev)
		prev = now
		at := time.Now()
		switch {
		case busy >= IdleBusyBelow:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = at.Add(-IdleSample)
		}
		if !quietSince.IsZero() && at.Sub(quietSince) >= IdleFor {
			return IdleWait{Waited: at.Sub(began), Idle: true, Busy: busy}, nil
		}
		if at.Sub(began) >= IdleLimit {
			return IdleWait{Waited: at.Sub(began), Busy: busy}, nil
		}
	}
}

// cpuTimes are the machine's summed CPU times, in clock ticks, from the
// first line of /proc/stat.
type cpuTimes struct{ total, idle uint64 }

func readCPUTimes() (cpuTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, fmt.Errorf("reading the machine's CPU times: %w", err)
	}
	return parseCPUTimes(string(data))
}

// parseCPUTimes reads the "cpu" line: user nice system idle iowait irq
// softirq steal (guest times are already in user). Waiting for I/O counts
// as idle.
func parseCPUTimes(stat string) (cpuTimes, error) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return cpuTimes{}, errors.New("/proc/stat does not start with the summed cpu line")
	}
	var t cpuTimes
	for i, f := range fields[1:min(len(fields), 9)] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: cpu field %d is %q", i+1, f)
		}
		t.total += v
		if i == 3 || i == 4 { // idle, iowait
			t.idle += v
		}
	}
	return t, nil
}

// busySince is the share of the cores' time that was busy between prev and t.
func (t cpuTimes) busySince(prev cpuTimes) float64 {
	total := t.total - prev.total
	if total == 0 {
		return 0
	}
	return float64(total-(t.idle-prev.idle)) / float64(total)
}
