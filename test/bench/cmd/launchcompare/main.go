// Command launchcompare measures trainstep's launch against a plain client-go
// loop, independently of `make bench`: on any cluster (a fresh one from `make
// cluster-up`), it launches one job with `trainstep run` at its default flags
// and creates the same rendered objects from 64 goroutines with no client
// rate limit, the two taking turns, and times each from its start until a
// metadata-only watcher in a process of its own has seen every pod and
// Service. Each side starts, as in `make bench`, once no namespace is being
// deleted, kube-apiserver has collected its garbage and the machine is idle
// (less than a quarter of its cores busy for a second). It prints each
// round's times, the machine's load, and the ratios.
// A warm-up round first, unrecorded, runs both sides once, so that neither
// side alone meets a cluster that has not yet held a job of this size (on a
// fresh cluster the first 512-pod burst's watch events arrive seconds late,
// whichever side makes it).
// With --loop-against-loop both sides are the loop: the ratios then show how
// far apart two launches of the same client land on this cluster, the floor
// under any client's spread.
//
//	go run ./test/bench/cmd/launchcompare --kubeconfig bin/cluster/kubeconfig --trainstep bin/trainstep
//
// It is a developer tool: it creates and deletes namespaces named "lc-…".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trainstep/trainstep/test/bench"
)

const usage = `usage: launchcompare [flags]            compare trainstep's launch with the client-go loop
       launchcompare watch --kubeconfig K -n NS --count N   (the watcher process it starts)
`

// roundTimeout bounds one side of one round.
const roundTimeout = 5 * time.Minute

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "watch" {
		err = watch(os.Args[2:])
	} else {
		err = compare(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "launchcompare:", err)
		os.Exit(1)
	}
}

func watch(args []string) error {
	flags := flag.NewFlagSet("watch", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig file")
	ns := flags.String("n", "", "namespace")
	count := flags.Int("count", 0, "how many pods to wait for")
	services := flags.Int("services", -1, "how many Services to wait for (default: as many as pods)")
	_ = flags.Parse(args)
	if *services < 0 {
		*services = *count
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	defer cancel()
	return bench.RunWatcherProcess(ctx, cfg, *ns, *count, *services, os.Stdout)
}

// options are compare's flags.
type options struct {
	kubeconfig, trainstep, job, timelineDir string
	rounds, warmUps                         int
	trainstepArgs                           string
	loopAgainstLoop                         bool
}

func compare(args []string) error {
	var o options
	flags := flag.NewFlagSet("launchcompare", flag.ExitOnError)
	flags.Usage = func() { fmt.Fprint(os.Stderr, usage); flags.PrintDefaults() }
	flags.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	flags.StringVar(&o.trainstep, "trainstep", "", "the trainstep binary to measure")
	flags.StringVar(&o.job, "job", "", "job manifest (default: a Kubeflow TFJob of 1 PS and 511 workers)")
	flags.IntVar(&o.rounds, "rounds", 5, "rounds; each runs both sides, which goes first alternating")
	flags.IntVar(&o.warmUps, "warm-up", 1, "unrecorded rounds before the measured ones")
	flags.StringVar(&o.timelineDir, "timeline-dir", "", "also pass trainstep --timeline, one file per round, into this directory")
	flags.StringVar(&o.trainstepArgs, "trainstep-args", "", "extra arguments for `trainstep run`, space separated")
	flags.BoolVar(&o.loopAgainstLoop, "loop-against-loop", false, "run the loop on both sides (trainstep still renders the objects): the ratios are the cluster's own spread")
	_ = flags.Parse(args)
	if o.trainstep == "" || o.kubeconfig == "" {
		flags.Usage()
		return errors.New("--trainstep and --kubeconfig are required")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "launchcompare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if o.job == "" {
		o.job = filepath.Join(work, "tfjob.yaml")
		if err := os.WriteFile(o.job, []byte(defaultJob), 0o644); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	admin, err := bench.UnlimitedClient(cfg)
	if err != nil {
		return err
	}
	m := &measurer{o: o, cfg: cfg, admin: admin, watcher: []string{self, "watch"}, work: work}
	first, second := "trainstep", "baseline"
	if o.loopAgainstLoop {
		first, second = "loop A", "loop B"
	}
	fmt.Printf("%-7s %-22s %-18s %12s %12s %7s\n", "round", "order", "load (1/5/15 min)", first, second, "ratio")
	var ratios []float64
	for round := 1 - o.warmUps; round <= o.rounds; round++ {
		load := bench.LoadAverage()
		trainstepFirst := round%2 != 0
		var ts, base time.Duration
		sides := []func() error{
			func() (err error) { ts, err = m.trainstep(round); return err },
			func() (err error) { base, err = m.baseline(round, second); return err },
		}
		if o.loopAgainstLoop {
			sides[0] = func() (err error) { ts, err = m.baseline(round, first); return err }
		}
		order := first + ", " + second
		if !trainstepFirst {
			sides[0], sides[1], order = sides[1], sides[0], second+", "+first
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
		}
		ratio := ts.Seconds() / base.Seconds()
		label := strconv.Itoa(round)
		if round < 1 {
			label = "warm-up"
		} else {
			ratios = append(ratios, ratio)
		}
		fmt.Printf("%-7s %-22s %-18s %11.2fs %11.2fs %7.2f\n", label, order, load, ts.Seconds(), base.Seconds(), ratio)
	}
	if len(ratios) == 0 {
		return nil
	}
	sorted := append([]float64(nil), ratios...)
	sort.Float64s(sorted)
	fmt.Printf("median ratio %.2f (min %.2f, max %.2f) over %d rounds\n", median(sorted), sorted[0], sorted[len(sorted)-1], len(sorted))
	fmt.Println("CPU each program used from a side's start until the watcher saw every object (the loop and the watchers are launchcompare):")
	for _, line := range m.costs {
		fmt.Println("  " + line)
	}
	return nil
}

// defaultJob is the job: a Kubeflow TFJob of 1 PS and 511 workers.
const defaultJob = `apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: launch
spec:
  runPolicy:
    cleanPodPolicy: None
  tfReplicaSpecs:
    PS:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: tensorflow
              image: registry.example/train:1
              command: ["python", "train.py"]
    Worker:
      replicas: 511
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: tensorflow
              image: registry.example/train:1
              command: ["python", "train.py"]
`

type measurer struct {
	o       options
	cfg     *rest.Config
	admin   kubernetes.Interface
	watcher []string
	work    string
	// noCollect: kube-apiserver refused to collect its garbage on request.
	noCollect bool
	// costs is a line per side: what its launch cost (LaunchCost).
	costs []string
}

// trainstep runs `trainstep run` on the job in a fresh namespace until the
// watcher has seen every object, and returns the time from just before the
// process started.
func (m *measurer) trainstep(round int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	defer cancel()
	ns, _, w, done, err := m.side(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	meter, err := m.waitIdle(ctx, "trainstep", round)
	if err != nil {
		return 0, err
	}
	args := []string{"run", "-f", m.o.job, "--kubeconfig", m.o.kubeconfig, "-n", ns, "--outputs-dir", filepath.Join(m.work, ns)}
	if m.o.timelineDir != "" {
		args = append(args, "--timeline", filepath.Join(m.o.timelineDir, fmt.Sprintf("round-%d-trainstep.txt", round)))
	}
	args = append(args, strings.Fields(m.o.trainstepArgs)...)
	cmd := exec.Command(m.o.trainstep, args...)
	stderr, err := os.Create(filepath.Join(m.work, ns+".stderr"))
	if err != nil {
		return 0, err
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	if err := meter.Start(); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	seen, err := w.Seen(ctx)
	if err == nil {
		err = m.recordCost(ctx, round, "trainstep", meter)
	}
	if m.o.timelineDir != "" {
		// trainstep writes its timeline just after its last create: give it
		// the moment before stopping it.
		waitForFile(filepath.Join(m.o.timelineDir, fmt.Sprintf("round-%d-trainstep.txt", round)), 3*time.Second)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		log, _ := os.ReadFile(stderr.Name())
		return 0, fmt.Errorf("trainstep: %w; its stderr ends:\n%s", err, lastLines(string(log), 20))
	}
	return seen.Sub(start), nil
}

// baseline creates the rendered objects from the client-go loop until the
// watcher has seen them all, and returns the time from the loop's start;
// side names it in the report and the timeline's file.
func (m *measurer) baseline(round int, side string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	defer cancel()
	_, objs, w, done, err := m.side(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	meter, err := m.waitIdle(ctx, side, round)
	if err != nil {
		return 0, err
	}
	if err := meter.Start(); err != nil {
		return 0, err
	}
	loop, start, err := bench.CreateBaselineTimed(ctx, m.cfg, objs)
	if err != nil {
		return 0, err
	}
	seen, err := w.Seen(ctx)
	if err != nil {
		return 0, fmt.Errorf("baseline: %w", err)
	}
	if err := m.recordCost(ctx, round, side, meter); err != nil {
		return 0, err
	}
	if m.o.timelineDir != "" {
		name := fmt.Sprintf("round-%d-%s.txt", round, strings.ReplaceAll(side, " ", "-"))
		if err := loop.WriteFile(filepath.Join(m.o.timelineDir, name)); err != nil {
			return 0, err
		}
	}
	return seen.Sub(start), nil
}

// recordCost keeps, for the report, what the side's launch cost.
func (m *measurer) recordCost(ctx context.Context, round int, side string, meter *bench.LaunchMeter) error {
	cost, err := meter.Stop(ctx)
	if err != nil {
		return err
	}
	m.costs = append(m.costs, fmt.Sprintf("round %d %-9s %s", round, side+":", cost))
	return nil
}

// waitIdle brings the cluster to a quiet state before a side starts, as
// `make bench` does (bench.Quiesce), and says so when the machine never
// became idle or a namespace was still being deleted. On a cluster whose
// kube-apiserver offers no /debug/pprof it only waits for namespaces being
// deleted and the idle machine, and says that once. It returns the side's
// meter, which reads kube-apiserver's metrics once no namespace is being
// deleted, so the earlier sides' deletes are not counted as this side's.
func (m *measurer) waitIdle(ctx context.Context, side string, round int) (*bench.LaunchMeter, error) {
	client := m.admin.CoreV1().RESTClient()
	deleting, err := bench.WaitNamespacesDeleted(ctx, client)
	if err != nil {
		return nil, err
	}
	meter, err := bench.NewLaunchMeter(ctx, client)
	if err != nil {
		return nil, err
	}
	if !m.noCollect {
		if err := bench.CollectAPIServerGarbage(ctx, client); err != nil {
			fmt.Fprintf(os.Stderr, "launchcompare: %v; waiting for an idle machine only\n", err)
			m.noCollect = true
		}
	}
	w, err := bench.WaitIdle(ctx)
	if err != nil {
		return nil, err
	}
	w.Namespaces = deleting
	if !w.Idle || deleting.Left > 0 {
		fmt.Fprintf(os.Stderr, "launchcompare: round %d, %s started on a busy cluster: %s\n", round, side, w)
	}
	return meter, nil
}

// side prepares one side of a round: a fresh namespace and a watcher of it
// in its own process; done stops the watcher and clears the namespace.
func (m *measurer) side(ctx context.Context) (string, bench.Objects, *bench.Watcher, func(), error) {
	ns, objs, err := m.namespace(ctx)
	if err != nil {
		return "", bench.Objects{}, nil, nil, err
	}
	w, err := bench.StartWatcher(m.watcher, m.o.kubeconfig, ns, len(objs.Pods), len(objs.Services))
	if err != nil {
		m.clear(ns)
		return "", bench.Objects{}, nil, nil, err
	}
	return ns, objs, w, func() { w.Stop(); m.clear(ns) }, nil
}

// namespace creates a namespace for one side of a round, waits for its
// default ServiceAccount (which any namespace a step runs in has), and
// renders the job into it.
func (m *measurer) namespace(ctx context.Context) (string, bench.Objects, error) {
	ns, err := m.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lc-"}}, metav1.CreateOptions{})
	if err != nil {
		return "", bench.Objects{}, fmt.Errorf("creating a namespace: %w", err)
	}
	err = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := m.admin.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, client404(err)
	})
	if err != nil {
		return "", bench.Objects{}, fmt.Errorf("waiting for the default ServiceAccount of %s: %w", ns.Name, err)
	}
	objs, err := bench.Render(ctx, m.o.trainstep, m.o.job, ns.Name)
	if err != nil {
		return "", bench.Objects{}, err
	}
	if len(objs.Services) != len(objs.Pods) && len(objs.Services) != 1 {
		return "", bench.Objects{}, fmt.Errorf("the job renders %d pods and %d Services; launchcompare expects one Service per pod or one for the job", len(objs.Pods), len(objs.Services))
	}
	return ns.Name, objs, nil
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// clear deletes the namespace's pods at once and its Services, waits until
// no pod is left, so the next side starts on an idle cluster, and deletes
// the namespace.
func (m *measurer) clear(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	defer cancel()
	if err := bench.DeleteAll(ctx, m.admin, ns, false); err != nil {
		fmt.Fprintln(os.Stderr, "launchcompare: clearing", ns+":", err)
	}
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := m.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err := m.admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintln(os.Stderr, "launchcompare: deleting namespace", ns+":", err)
	}
}

// waitForFile waits until path exists, at most for limit.
func waitForFile(path string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
