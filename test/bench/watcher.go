package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// The watcher process's lines on stdout: one when its watches are open, one
// when it has seen every object (with the moment, in Unix nanoseconds).
const (
	watcherReadyLine = "watching"
	watcherSeenLine  = "seen"
)

var (
	podsResource     = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	servicesResource = schema.GroupVersionResource{Version: "v1", Resource: "services"}
)

// WatchCreated lists and watches, metadata only, the pods and Services of
// namespace ns, calls ready once both watches are open, and returns the
// moment it had seen pods distinct pods and services distinct Services (as
// many as pods under the per-replica layout, one under the per-job layout). Metadata only,
// so what it costs the API server and this process does not grow with the
// pods' size: the watcher should not be what is measured.
func WatchCreated(ctx context.Context, cfg *rest.Config, ns string, pods, services int, ready func()) (time.Time, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	client, err := metadata.NewForConfig(cfg)
	if err != nil {
		return time.Time{}, fmt.Errorf("building the metadata client: %w", err)
	}
	var mu sync.Mutex
	seen := map[schema.GroupVersionResource]map[string]bool{podsResource: {}, servicesResource: {}}
	done := make(chan time.Time, 1)
	note := func(r schema.GroupVersionResource, name string, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		seen[r][name] = true
		if len(seen[podsResource]) == pods && len(seen[servicesResource]) == services && len(done) == 0 {
			done <- at
		}
	}
	var watchers []*watchtools.RetryWatcher
	defer func() {
		for _, w := range watchers {
			w.Stop()
		}
	}()
	for _, r := range []schema.GroupVersionResource{podsResource, servicesResource} {
		list, err := client.Resource(r).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return time.Time{}, fmt.Errorf("listing %s of %s: %w", r.Resource, ns, err)
		}
		for _, item := range list.Items {
			note(r, item.Name, time.Now())
		}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return client.Resource(r).Namespace(ns).Watch(ctx, o)
			},
		})
		if err != nil {
			return time.Time{}, fmt.Errorf("watching %s of %s: %w", r.Resource, ns, err)
		}
		watchers = append(watchers, w)
		go func() {
			for e := range w.ResultChan() {
				at := time.Now()
				if m, ok := e.Object.(*metav1.PartialObjectMetadata); ok && e.Type == watch.Added {
					note(r, m.Name, at)
				}
			}
		}()
	}
	ready()
	select {
	case at := <-done:
		return at, nil
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		return time.Time{}, fmt.Errorf("waiting for %d pods and %d Services (seen %d and %d): %w",
			pods, services, len(seen[podsResource]), len(seen[servicesResource]), context.Cause(ctx))
	}
}

// RunWatcherProcess is the watcher process's main: WatchCreated, reporting
// on out.
func RunWatcherProcess(ctx context.Context, cfg *rest.Config, ns string, pods, services int, out io.Writer) error {
	at, err := WatchCreated(ctx, cfg, ns, pods, services, func() { fmt.Fprintln(out, watcherReadyLine) })
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, watcherSeenLine, at.UnixNano())
	return err
}

// Watcher is a watcher process: WatchCreated in a process of its own, so
// that neither side's measured process also decodes the watch.
type Watcher struct {
	cmd *exec.Cmd
	// lines are the process's further lines on stdout; closed at its end.
	lines  chan string
	wait   chan error // the process's exit, once its stdout is read to the end
	stderr *lockedBuffer
}

// StartWatcher starts command (the watcher process, given the kubeconfig,
// namespace and counts of pods and Services as its last arguments) and
// returns once its watches are open.
func StartWatcher(command []string, kubeconfig, ns string, pods, services int) (*Watcher, error) {
	args := append(append([]string{}, command[1:]...), "--kubeconfig", kubeconfig, "-n", ns,
		"--count", strconv.Itoa(pods), "--services", strconv.Itoa(services))
	cmd := exec.Command(command[0], args...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the watcher: %w", err)
	}
	scanner := bufio.NewScanner(stdout)
	if !scanner.Scan() || scanner.Text() != watcherReadyLine {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the watcher did not start watching: %s", strings.TrimSpace(stderr.String()))
	}
	w := &Watcher{cmd: cmd, lines: make(chan string, 4), wait: make(chan error, 1), stderr: &stderr}
	go func() {
		// Wait closes stdout: only once every line is read, or a watcher
		// that saw everything and exited before Seen was called would lose
		// its last line.
		for scanner.Scan() {
			w.lines <- scanner.Text()
		}
		close(w.lines)
		w.wait <- cmd.Wait()
	}()
	return w, nil
}

// Seen waits for the watcher to have seen every object and returns when it did.
func (w *Watcher) Seen(ctx context.Context) (time.Time, error) {
	select {
	case l, ok := <-w.lines:
		if value, found := strings.CutPrefix(l, watcherSeenLine+" "); ok && found {
			nanos, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("the watcher said %q", l)
			}
			return time.Unix(0, nanos), nil
		}
		return time.Time{}, fmt.Errorf("the watcher ended without seeing every object (%v): %s", <-w.wait, tail(strings.TrimSpace(w.stderr.String()), 2000))
	case <-ctx.Done():
		w.Stop()
		return time.Time{}, fmt.Errorf("waiting for the watcher: %w", ctx.Err())
	}
}

// Stop ends the watcher process.
func (w *Watcher) Stop() {
	_ = w.cmd.Process.Kill()
}
