package executor

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/logs"
)

// logStreamer picks which replica pods' logs reach the step's stderr and
// hands them to pkg/logs. A replica whose log is not streamed still gets
// its last lines printed when its main container fails.
type logStreamer struct {
	pods    *logs.PodStreamer
	mode    logs.Mode
	job     *v1alpha1.TrainJob
	types   map[string]v1alpha1.ReplicaType // label value → type
	leaders map[frameworks.ReplicaRef]bool

	client    corev1client.PodsGetter
	namespace string
	out       *logs.Prefixer
	log       *zap.Logger
	mu        sync.Mutex
	tails     map[failedInstance]bool // failures whose last lines were printed
	tailsDone sync.WaitGroup
}

// failedInstance is one failed container instance: a pod and its restart count.
type failedInstance struct {
	uid      types.UID
	restarts int32
}

// tailTimeout bounds the request for a failed replica's last lines.
const tailTimeout = 10 * time.Second

func newLogStreamer(cfg *Config, conn *connection, job *v1alpha1.TrainJob, log *zap.Logger) *logStreamer {
	s := &logStreamer{mode: cfg.Logs, job: job, types: map[string]v1alpha1.ReplicaType{}, leaders: map[frameworks.ReplicaRef]bool{},
		client: conn.core, namespace: conn.namespace, out: logs.NewPrefixer(cfg.Stderr), log: log, tails: map[failedInstance]bool{}}
	if cfg.Logs != logs.ModeNone {
		// A leader's log line may carry its training status.
		s.out = logs.NewPrefixer(cfg.status.tapLogs(cfg.Stderr))
	}
	for t := range job.Spec.ReplicaSpecs {
		s.types[strings.ToLower(string(t))] = t
	}
	for _, ref := range frameworks.Leaders(job) {
		s.leaders[ref] = true
	}
	if cfg.Logs != logs.ModeNone {
		s.pods = logs.NewPodStreamer(conn.core, conn.namespace, s.out, log)
	}
	return s
}

// observe is called with every replica pod the controller sees.
func (s *logStreamer) observe(pod *corev1.Pod) {
	t, ok := s.types[pod.Labels[v1alpha1.LabelReplicaType]]
	index, err := strconv.Atoi(pod.Labels[v1alpha1.LabelReplicaIndex])
	if !ok || err != nil {
		return
	}
	container := ""
	if main := frameworks.MainContainer(s.job, t); main != nil {
		container = main.Name
	}
	prefix := logs.ReplicaPrefix(string(t), index)
	if s.pods == nil || !s.mode.Selects(s.leaders[frameworks.ReplicaRef{Type: t, Index: index}]) {
		s.showFailure(pod, container, prefix)
		return
	}
	s.pods.Observe(pod, prefix, container)
}

// showFailure prints, once per failed instance, the last lines the kubelet
// kept of a main container that exited with a code other than 0: the
// current one, or the one before an in-place restart.
func (s *logStreamer) showFailure(pod *corev1.Pod, container, prefix string) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		previous := false
		restarts := cs.RestartCount
		failed := cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0
		if !failed && cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode != 0 && cs.RestartCount > 0 {
			failed, previous, restarts = true, true, cs.RestartCount-1
		}
		if !failed {
			return
		}
		key := failedInstance{uid: pod.UID, restarts: restarts}
		s.mu.Lock()
		seen := s.tails[key]
		s.tails[key] = true
		s.mu.Unlock()
		if seen {
			return
		}
		s.log.Warn("replica failed; its last lines follow", zap.String("pod", pod.Name), zap.Int("lines", logs.FailedTailLines))
		s.tailsDone.Add(1)
		go func() {
			defer s.tailsDone.Done()
			ctx, cancel := context.WithTimeout(context.Background(), tailTimeout)
			defer cancel()
			if err := logs.PrintPodTail(ctx, s.client, s.namespace, pod.Name, container, previous, logs.FailedTailLines, s.out, prefix); err != nil {
				s.log.Warn("could not show the failed replica's last lines", zap.String("pod", pod.Name), zap.Error(err))
			}
		}()
		return
	}
}

func (s *logStreamer) stop(ctx context.Context) {
	if s.pods != nil {
		s.pods.Stop(ctx)
	}
	done := make(chan struct{})
	go func() { s.tailsDone.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
