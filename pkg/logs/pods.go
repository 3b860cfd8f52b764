package logs

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Defaults of a PodStreamer.
const (
	retryInitialInterval = 500 * time.Millisecond
	retryMaxInterval     = 10 * time.Second
	retryMaxElapsed      = 2 * time.Minute
	retryMaxAttempts     = 8
)

// openLogsFunc opens one log request. It is a field so tests can serve
// timestamped logs and errors that client-go's fake clientset cannot.
type openLogsFunc func(ctx context.Context, podName string, opts *corev1.PodLogOptions) (io.ReadCloser, error)

// PodStreamer follows the logs of replica pods into a Prefixer. It starts
// one stream per container instance: a pod UID, a container and its restart
// count. A container restarted in place and a pod recreated under the same
// name are new instances and are streamed too; lines already printed for a
// replica are not printed again (see highWater). Transient errors reopen
// the stream with backoff, resuming after the last printed line; a stream
// the server ends is finished (the kubelet ends a follow stream when its
// container exits).
//
// When a container restarts in place, the old instance's stream drains and
// is cancelled before the new one opens. A pod replaced by a new pod is not
// ordered against it (their creation order is not reliable from updates):
// its stream ends when the server closes it, or at Stop.
//
// It is safe for concurrent use. It only reads logs.
type PodStreamer struct {
	namespace  string
	out        *Prefixer
	logger     *zap.Logger
	open       openLogsFunc
	newBackOff func() backoff.BackOff

	ctx    context.Context // parent of every stream; cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	stopped   bool
	instances map[instanceKey]*stream // every instance streamed so far
	active    map[*stream]struct{}    // streams whose goroutine still runs
	marks     map[string]*highWater   // by replica prefix and container
}

// instanceSource says which container a log request reaches for an
// instance: the current one, or (while the current one waits to restart)
// the last terminated one, which the kubelet serves in that state.
type instanceSource int

const (
	sourceCurrent instanceSource = iota
	sourceLastTerminated
)

// instanceKey identifies one container instance whose log is streamed once.
type instanceKey struct {
	uid       types.UID
	container string
	restarts  int32
	source    instanceSource
}

// NewPodStreamer returns a streamer reading pods' logs in namespace through
// client and writing them to out; logger receives its own diagnostics.
func NewPodStreamer(client corev1client.PodsGetter, namespace string, out *Prefixer, logger *zap.Logger) *PodStreamer {
	if logger == nil {
		logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	pods := client.Pods(namespace)
	return &PodStreamer{
		namespace: namespace,
		out:       out,
		logger:    logger,
		open: func(ctx context.Context, podName string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
			return pods.GetLogs(podName, opts).Stream(ctx)
		},
		newBackOff: defaultBackOff,
		ctx:        ctx,
		cancel:     cancel,
		instances:  map[instanceKey]*stream{},
		active:     map[*stream]struct{}{},
		marks:      map[string]*highWater{},
	}
}

func defaultBackOff() backoff.BackOff {
	return backoff.WithMaxRetries(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(retryInitialInterval),
		backoff.WithMaxInterval(retryMaxInterval),
		backoff.WithMaxElapsedTime(retryMaxElapsed),
	), retryMaxAttempts)
}

// Observe is called with every added or updated pod of a replica whose logs
// are wanted; prefix is the replica's line prefix (ReplicaPrefix) and
// container the container to follow ("" means the pod's first container).
//
// It starts a stream for the container's current instance unless one was
// already started: a follow stream while the container runs, a plain read
// once it has terminated, or a read of the last terminated instance while
// the container waits to restart (so a container that crashed before it
// was seen running still has its output shown). Streams of instances that
// have ended are finished once they have drained. After Stop it does
// nothing.
func (s *PodStreamer) Observe(pod *corev1.Pod, prefix, container string) {
	if pod == nil {
		return
	}
	if container == "" && len(pod.Spec.Containers) > 0 {
		container = pod.Spec.Containers[0].Name
	}
	status := containerStatus(pod, container)
	if status == nil {
		return
	}
	key, follow, ok := instanceOf(pod.UID, status)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.retireEndedLocked(key, follow)
	if st, seen := s.instances[key]; seen && !(st.gaveUp && follow) {
		return
	}
	s.startLocked(key, pod.Name, prefix, follow)
}

// Stop finishes every stream: each first reads the rest of its log, what
// its container printed until now, to the end of a plain read, then it
// ends. Stop returns when every stream goroutine has exited; ctx bounds
// the reading, not the exit after cancellation.
func (s *PodStreamer) Stop(ctx context.Context) {
	s.mu.Lock()
	s.stopped = true
	for st := range s.active {
		st.retire(restCurrent)
	}
	s.mu.Unlock()

	drained := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		s.logger.Debug("cancelling replica log streams that did not drain in time")
	}
	s.cancel()
	<-drained
}

func containerStatus(pod *corev1.Pod, container string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == container {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// instanceOf says which instance a container status shows, whether its log
// can still grow (follow), and whether it has a log at all yet.
func instanceOf(uid types.UID, status *corev1.ContainerStatus) (key instanceKey, follow, ok bool) {
	key = instanceKey{uid: uid, container: status.Name, restarts: status.RestartCount}
	switch {
	case status.State.Running != nil:
		return key, true, true
	case status.State.Terminated != nil:
		return key, false, true
	case status.LastTerminationState.Terminated != nil:
		key.source = sourceLastTerminated
		return key, false, true
	}
	return key, false, false
}

// retireEndedLocked finishes follow streams of the same pod and container
// whose container is known to be dead: an older restart, or any instance
// when the container no longer runs.
func (s *PodStreamer) retireEndedLocked(observed instanceKey, running bool) {
	for st := range s.active {
		if !st.follow || st.key.uid != observed.uid || st.key.container != observed.container {
			continue
		}
		switch {
		case st.key.restarts == observed.restarts-1:
			st.retire(restPrevious)
		case st.key.restarts < observed.restarts:
			st.retire(restGone)
		case !running:
			st.retire(restCurrent)
		}
	}
}

func (s *PodStreamer) startLocked(key instanceKey, podName, prefix string, follow bool) {
	markKey := prefix + "/" + key.container
	mark := s.marks[markKey]
	if mark == nil {
		mark = &highWater{}
		s.marks[markKey] = mark
	}
	// Streams of this pod's ended instances finish first: their last lines
	// are older than anything the new instance prints, and printing the new
	// ones first would make the high-water mark drop the old ones.
	var predecessors []*stream
	for other := range s.active {
		if other.key.uid == key.uid && other.key.container == key.container && other.isRetired() {
			predecessors = append(predecessors, other)
		}
	}
	ctx, cancel := context.WithCancel(s.ctx)
	followCtx, cancelFollow := context.WithCancel(ctx)
	st := &stream{
		followCtx:    followCtx,
		cancelFollow: cancelFollow,
		key:          key,
		podName:      podName,
		prefix:       prefix,
		follow:       follow,
		mark:         mark,
		predecessors: predecessors,
		cancel:       cancel,
		retired:      make(chan struct{}),
		done:         make(chan struct{}),
	}
	s.instances[key] = st
	s.active[st] = struct{}{}
	s.wg.Add(1)
	go s.run(ctx, st)
}

// finished records the end of a stream's goroutine.
func (s *PodStreamer) finished(st *stream, gaveUp bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, st)
	st.gaveUp = gaveUp
}
