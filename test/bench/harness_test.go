package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/render"
	"github.com/trainstep/trainstep/pkg/result"
	"github.com/trainstep/trainstep/test/cluster"
)

// runTimeout bounds one measured run of n replicas, generous on two busy
// cores: 4 minutes, and a tenth of a second more per replica.
func runTimeout(n int) time.Duration { return 4*time.Minute + time.Duration(n)*100*time.Millisecond }

// harness runs the measurements against one test cluster.
type harness struct {
	c      *cluster.Cluster
	binary string
	// watcher is the command of the watcher process (launchcompare watch)
	// that times every launch: metadata only, in a process of its own.
	watcher []string
	build   string // how the binary was built, for the report
	// admin deletes and patches for the bench; it has no client-side rate limit.
	admin kubernetes.Interface
	// serviceCollection: the API server offers deletecollection on Services.
	serviceCollection bool
	// stepEnv is added to the environment of the sweep's steps.
	stepEnv []string
}

// namespacedJob is a fresh namespace and a job file for one run.
type namespacedJob struct {
	ns   string
	spec JobSpec
	file string
	dir  string
	// fromIdle: the launch starts from a quiet cluster (Quiesce), its
	// watches already open.
	fromIdle bool
}

// quiesce brings the cluster to the state a measured launch starts from
// (Quiesce) when j asks for it, and returns the launch's meter.
func (h *harness) quiesce(ctx context.Context, j namespacedJob) (*LaunchMeter, IdleWait, error) {
	client := h.admin.CoreV1().RESTClient()
	if !j.fromIdle {
		meter, err := NewLaunchMeter(ctx, client)
		return meter, IdleWait{}, err
	}
	return Quiesce(ctx, client)
}

func (h *harness) prepare(t testing.TB, spec JobSpec) namespacedJob {
	t.Helper()
	j := namespacedJob{ns: h.c.NamespaceWithPrefix(t, namespacePrefix), spec: spec, dir: t.TempDir()}
	manifest, err := spec.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	j.file = filepath.Join(j.dir, "job.yaml")
	if err := os.WriteFile(j.file, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	return j
}

// namespacePrefix starts the bench's namespaces. Every address in a pod's
// TF_CONFIG names the namespace, and at 2048 workers a namespace named after
// the test (36 characters) makes TF_CONFIG longer than the 128 KiB Linux
// allows one environment variable, which trainstep refuses before creating
// anything: the bench's namespaces are "b-" and five random characters.
const namespacePrefix = "b-"

// trainstepRun is what one measured `trainstep run` produced.
type trainstepRun struct {
	first, created, running time.Duration // from the process start
	lastCreate              time.Duration // its own last create accepted, from its --timeline
	timeline                string        // its --timeline file, written at the last create
	launch                  LaunchCost    // from its start until all were seen
	idle                    IdleWait      // the wait for an idle machine before the start
	cpuToCreated            time.Duration // trainstep's CPU time until all were created
	detection               time.Duration // deciding pod seen ended → outputs written
	wall                    time.Duration // process start → exit
	exit                    Exit
	requests                map[string]int
	// anomaly describes what went differently from a clean launch, if anything.
	anomaly string
}

// runTrainstep launches a job of n workers, waits for all of them to run,
// ends worker-0 and measures how soon the outputs follow. With
// cleanPodPolicy None the outputs are written as soon as the end is
// noticed; with the default (Running) trainstep first deletes the other
// workers and waits until they are gone.
func (h *harness) runTrainstep(ctx context.Context, j namespacedJob, qps float32, burst int, env []string, extraArgs ...string) (trainstepRun, error) {
	var run trainstepRun
	n := j.spec.Workers
	ctx, cancel := context.WithTimeout(ctx, runTimeout(j.spec.Workers))
	defer cancel()
	tracker, err := Track(ctx, h.c.Config, j.ns)
	if err != nil {
		return run, err
	}
	watcher, err := h.startWatcher(j)
	if err != nil {
		return run, err
	}
	defer watcher.Stop()
	meter, idle, err := h.quiesce(ctx, j)
	if err != nil {
		return run, err
	}
	run.idle = idle
	timelineFile := filepath.Join(j.dir, "timeline.txt")
	if err := meter.Start(); err != nil {
		return run, err
	}
	p, err := StartTrainstep(RunOptions{Binary: h.binary, Kubeconfig: h.c.Kubeconfig, Namespace: j.ns,
		JobFile: j.file, QPS: qps, Burst: burst, Dir: j.dir, Env: env,
		ExtraArgs: append([]string{"--timeline", timelineFile}, extraArgs...)})
	if err != nil {
		return run, err
	}
	fail := func(err error) (trainstepRun, error) {
		p.Kill()
		return run, fmt.Errorf("%w; trainstep stderr:\n%s", err, tail(p.stderr.String(), 4000))
	}
	launching, stop := p.WhileRunning(ctx)
	defer stop()
	seen, err := watcher.Seen(launching)
	if err != nil {
		return fail(err)
	}
	if run.launch, err = meter.Stop(ctx); err != nil {
		return fail(err)
	}
	if err := waitCreated(launching, tracker, j.spec); err != nil {
		return fail(err)
	}
	if run.cpuToCreated, err = p.CPUSoFar(); err != nil {
		return fail(err)
	}
	if err := waitRunning(launching, tracker, n); err != nil {
		return fail(err)
	}
	run.first = tracker.FirstCreatedAt().Sub(p.Started)
	run.created, run.running = seen.Sub(p.Started), tracker.RunningAt(n).Sub(p.Started)
	data, err := os.ReadFile(timelineFile)
	if err != nil {
		return fail(fmt.Errorf("reading trainstep's timeline: %w", err))
	}
	run.timeline = string(data)
	if run.lastCreate, err = LastCreate(run.timeline); err != nil {
		return fail(err)
	}

	written := make(chan timeOrError, 1)
	go func() {
		at, err := p.OutputsWrittenAt(ctx)
		written <- timeOrError{at, err}
	}()
	if err := h.patchExitAfter(ctx, j.ns, j.spec.DecidingPod(), "1s"); err != nil {
		return fail(err)
	}
	ended, err := tracker.WaitPodEnded(ctx, j.spec.DecidingPod())
	if err != nil {
		return fail(err)
	}
	w := <-written
	if w.err != nil {
		return fail(w.err)
	}
	run.detection = w.at.Sub(ended)
	if run.exit, err = p.Wait(ctx); err != nil {
		return run, err
	}
	run.wall = p.Exited.Sub(p.Started)
	if run.exit.Code != result.ExitSucceeded {
		return run, fmt.Errorf("trainstep exited %d, want %d; stderr:\n%s", run.exit.Code, result.ExitSucceeded, tail(run.exit.Stderr, 4000))
	}
	run.anomaly = anomalyOf(tracker, j.spec, run.exit.Stderr)
	if run.requests, err = p.APIRequests(); err != nil {
		return run, err
	}
	return run, h.clear(ctx, tracker, j.ns, false)
}

// runLaunchOnly starts trainstep and returns its time to all of the job's
// objects created; then it kills trainstep and clears the namespace.
func (h *harness) runLaunchOnly(ctx context.Context, j namespacedJob, qps float32, burst int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout(j.spec.Workers))
	defer cancel()
	tracker, err := Track(ctx, h.c.Config, j.ns)
	if err != nil {
		return 0, err
	}
	watcher, err := h.startWatcher(j)
	if err != nil {
		return 0, err
	}
	defer watcher.Stop()
	p, err := StartTrainstep(RunOptions{Binary: h.binary, Kubeconfig: h.c.Kubeconfig, Namespace: j.ns,
		JobFile: j.file, QPS: qps, Burst: burst, Dir: j.dir})
	if err != nil {
		return 0, err
	}
	launching, stop := p.WhileRunning(ctx)
	seen, err := watcher.Seen(launching)
	if err == nil {
		err = waitCreated(launching, tracker, j.spec)
	}
	stop()
	p.Kill()
	if err != nil {
		return 0, fmt.Errorf("%w; trainstep stderr:\n%s", err, tail(p.stderr.String(), 4000))
	}
	return seen.Sub(p.Started), h.clear(ctx, tracker, j.ns, false)
}

// anomalyOf describes, with trainstep's own log lines about it, a run in
// which some pod or Service of the job was created more than once; empty
// when each was created once, however many requests that took.
func anomalyOf(tracker *Tracker, spec JobSpec, stderr string) string {
	counts := tracker.Counts()
	if counts.PodsSeen == spec.Workers && counts.ServicesSeen == spec.Services() {
		return ""
	}
	return fmt.Sprintf("trainstep made %d pods and %d Services for %d workers (%s layout): %s; its log: %s",
		counts.PodsSeen, counts.ServicesSeen, spec.Workers, spec.Layout(), strings.Join(tracker.Recreated(), ", "),
		strings.Join(logLinesAbout(stderr, "recreat", "lost", "removed"), " "))
}

// logLinesAbout returns trainstep's log lines (at most five, each shortened)
// that contain one of the words, in backquotes for the report.
func logLinesAbout(stderr string, words ...string) []string {
	var lines []string
	for _, line := range strings.Split(stderr, "\n") {
		for _, w := range words {
			if strings.Contains(strings.ToLower(line), w) && len(lines) < 5 {
				lines = append(lines, "`"+tail(strings.TrimSpace(line), 300)+"`")
				break
			}
		}
	}
	if len(lines) == 0 {
		return []string{"(no line about it)"}
	}
	return lines
}

type timeOrError struct {
	at  time.Time
	err error
}

// waitLaunched waits for all the job's pods and Services, then for all pods Running.
func waitLaunched(ctx context.Context, tracker *Tracker, spec JobSpec) error {
	if err := waitCreated(ctx, tracker, spec); err != nil {
		return err
	}
	return waitRunning(ctx, tracker, spec.Workers)
}

func waitCreated(ctx context.Context, tracker *Tracker, spec JobSpec) error {
	pods, services := spec.Workers, spec.Services()
	return tracker.WaitFor(ctx, fmt.Sprintf("%d pods and %d services", pods, services), func(c Counts) bool {
		return c.PodsSeen >= pods && c.ServicesSeen >= services
	})
}

func waitRunning(ctx context.Context, tracker *Tracker, n int) error {
	return tracker.WaitFor(ctx, fmt.Sprintf("%d running pods", n), func(c Counts) bool { return c.Running >= n })
}

// patchExitAfter makes one live pod's containers exit 0 (KWOK reads the
// annotation from the live pod).
func (h *harness) patchExitAfter(ctx context.Context, ns, pod, after string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AnnotationExitAfter, after)
	if _, err := h.admin.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching %s/%s: %w", ns, pod, err)
	}
	return nil
}

// startWatcher starts the watcher process for j's pods and Services; it
// returns once the watches are open.
func (h *harness) startWatcher(j namespacedJob) (*Watcher, error) {
	return StartWatcher(h.watcher, h.c.Kubeconfig, j.ns, j.spec.Workers, j.spec.Services())
}

// clear deletes what is left in the namespace and waits until it is gone, so
// the next run starts on an idle cluster. Unless graceful, pods are deleted
// at once (grace period 0) instead of through KWOK: half the API writes, for
// clearing up that is not measured.
func (h *harness) clear(ctx context.Context, tracker *Tracker, ns string, graceful bool) error {
	if err := DeleteAll(ctx, h.admin, ns, graceful); err != nil {
		return err
	}
	return tracker.WaitFor(ctx, "the namespace to empty", func(c Counts) bool { return c.LivePods == 0 && c.LiveServices == 0 })
}

// baselineRun is what one run of the client-go loop produced.
type baselineRun struct {
	first, created, running time.Duration // from the start of the loop
	lastCreate              time.Duration // the loop's last create accepted
	timeline                string        // the loop's timeline, as trainstep's --timeline
	launch                  LaunchCost    // from its start until all were seen
	idle                    IdleWait      // the wait for an idle machine before the start
	deleted                 time.Duration // deleting everything the measured way, until gone
	collectionRequests      int           // DeleteCollection requests sent, with DeleteByLabel
}

// runBaseline creates the objects `trainstep render` prints with the plain
// client-go loop and waits for every pod to run. Then it deletes them all:
// with a DeleteWay, gracefully as trainstep does and measured until gone;
// without one, at once and unmeasured.
func (h *harness) runBaseline(ctx context.Context, j namespacedJob, way DeleteWay) (baselineRun, error) {
	var run baselineRun
	n := j.spec.Workers
	ctx, cancel := context.WithTimeout(ctx, runTimeout(n))
	defer cancel()
	objs, err := Render(ctx, h.binary, j.file, j.ns)
	if err != nil {
		return run, err
	}
	if len(objs.Pods) != n || len(objs.Services) != j.spec.Services() {
		return run, fmt.Errorf("render printed %d pods and %d services for %d workers, want %d services (%s layout)",
			len(objs.Pods), len(objs.Services), n, j.spec.Services(), j.spec.Layout())
	}
	tracker, err := Track(ctx, h.c.Config, j.ns)
	if err != nil {
		return run, err
	}
	watcher, err := h.startWatcher(j)
	if err != nil {
		return run, err
	}
	defer watcher.Stop()
	meter, idle, err := h.quiesce(ctx, j)
	if err != nil {
		return run, err
	}
	run.idle = idle
	if err := meter.Start(); err != nil {
		return run, err
	}
	loop, start, err := CreateBaselineTimed(ctx, h.c.Config, objs)
	if err != nil {
		return run, err
	}
	run.lastCreate = time.Since(start)
	var table strings.Builder
	if _, err := loop.WriteTo(&table); err != nil {
		return run, err
	}
	run.timeline = table.String()
	seen, err := watcher.Seen(ctx)
	if err != nil {
		return run, err
	}
	if run.launch, err = meter.Stop(ctx); err != nil {
		return run, err
	}
	if err := waitLaunched(ctx, tracker, j.spec); err != nil {
		return run, err
	}
	run.first = tracker.FirstCreatedAt().Sub(start)
	run.created, run.running = seen.Sub(start), tracker.RunningAt(n).Sub(start)
	// The deletes go as the admin client's: no rate limit, the same
	// transport as the creates' client.
	deleteStart := time.Now()
	switch way {
	case "":
		return run, h.clear(ctx, tracker, j.ns, false)
	case DeleteLoop:
		err = DeleteAll(ctx, h.admin, j.ns, true)
	case DeleteByLabel:
		run.collectionRequests, err = DeleteCollections(ctx, h.admin, j.ns, render.JobSelector(render.Identity{JobName: j.spec.Name}).String(), h.serviceCollection)
	default:
		return run, fmt.Errorf("unknown delete way %q", way)
	}
	if err != nil {
		return run, fmt.Errorf("baseline %s: %w", way, err)
	}
	if err := tracker.WaitFor(ctx, "the namespace to empty", func(c Counts) bool { return c.LivePods == 0 && c.LiveServices == 0 }); err != nil {
		return run, err
	}
	run.deleted = tracker.LastGoneAt().Sub(deleteStart)
	return run, nil
}

// teardownRun is one SIGTERM of a running job.
type teardownRun struct {
	gone     time.Duration // SIGTERM → no pod or Service of the job left
	exited   time.Duration // SIGTERM → trainstep exited
	requests map[string]int
	anomaly  string
}

// runTeardown launches a job, waits for every worker to run, sends SIGTERM
// and measures until the namespace holds none of the job's objects.
func (h *harness) runTeardown(ctx context.Context, j namespacedJob) (teardownRun, error) {
	var run teardownRun
	ctx, cancel := context.WithTimeout(ctx, runTimeout(j.spec.Workers))
	defer cancel()
	tracker, err := Track(ctx, h.c.Config, j.ns)
	if err != nil {
		return run, err
	}
	p, err := StartTrainstep(RunOptions{Binary: h.binary, Kubeconfig: h.c.Kubeconfig, Namespace: j.ns, JobFile: j.file, Dir: j.dir,
		ExtraArgs: []string{"--termination-grace", TeardownGrace.String()}})
	if err != nil {
		return run, err
	}
	launching, stop := p.WhileRunning(ctx)
	defer stop()
	if err := waitLaunched(launching, tracker, j.spec); err != nil {
		p.Kill()
		return run, fmt.Errorf("%w; trainstep stderr:\n%s", err, tail(p.stderr.String(), 4000))
	}
	signalled := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		p.Kill()
		return run, fmt.Errorf("sending SIGTERM: %w", err)
	}
	if err := tracker.WaitFor(ctx, "teardown", func(c Counts) bool { return c.LivePods == 0 && c.LiveServices == 0 }); err != nil {
		p.Kill()
		return run, err
	}
	run.gone = tracker.LastGoneAt().Sub(signalled)
	exit, err := p.Wait(ctx)
	if err != nil {
		return run, err
	}
	run.exited = p.Exited.Sub(signalled)
	if exit.Code != result.ExitTerminated {
		return run, fmt.Errorf("trainstep exited %d after SIGTERM, want %d; stderr:\n%s", exit.Code, result.ExitTerminated, tail(exit.Stderr, 4000))
	}
	run.anomaly = anomalyOf(tracker, j.spec, exit.Stderr)
	run.requests, err = p.APIRequests()
	return run, err
}

// runToEnd runs a job whose workers all exit by themselves and returns the
// run's API requests (for comparing jobs of different lengths), how long
// trainstep ran, and any anomaly.
func (h *harness) runToEnd(ctx context.Context, j namespacedJob, length time.Duration) (map[string]int, time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout(j.spec.Workers)+length)
	defer cancel()
	tracker, err := Track(ctx, h.c.Config, j.ns)
	if err != nil {
		return nil, 0, "", err
	}
	p, err := StartTrainstep(RunOptions{Binary: h.binary, Kubeconfig: h.c.Kubeconfig, Namespace: j.ns, JobFile: j.file, Dir: j.dir})
	if err != nil {
		return nil, 0, "", err
	}
	exit, err := p.Wait(ctx)
	took := time.Since(p.Started)
	if err != nil {
		return nil, 0, "", err
	}
	if exit.Code != result.ExitSucceeded {
		return nil, 0, "", fmt.Errorf("trainstep exited %d, want %d; stderr:\n%s", exit.Code, result.ExitSucceeded, tail(exit.Stderr, 4000))
	}
	requests, err := p.APIRequests()
	if err != nil {
		return nil, 0, "", err
	}
	return requests, took, anomalyOf(tracker, j.spec, exit.Stderr), h.clear(ctx, tracker, j.ns, false)
}

// check ends the test on a failed run.
func check(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// jobSpec is the benchmark's job of n workers, under the default Service
// layout (per job).
func jobSpec(n int, policy v1alpha1.CleanPodPolicy, exitAfter string) JobSpec {
	return jobSpecIn("", n, policy, exitAfter)
}

// jobSpecIn is the benchmark's job of n workers under a Service layout.
func jobSpecIn(layout v1alpha1.ServiceLayout, n int, policy v1alpha1.CleanPodPolicy, exitAfter string) JobSpec {
	return JobSpec{Name: "bench", Workers: n, CleanPodPolicy: policy, ExitAfter: exitAfter, ServiceLayout: layout}
}

// maxLaunchJobName names the job of MaxLaunchReplicas workers: TF_CONFIG
// names it twice per worker under the per-job layout, and "bench" would make
// it 126 KB, at the edge of the 128 KiB one environment variable may hold
// ("max": 110 KB).
const maxLaunchJobName = "max"
