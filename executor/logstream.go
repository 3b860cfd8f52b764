package executor

import (
	"context"
	"strconv"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks"
	"github.com/trainstep/trainstep/pkg/logs"
)

// logStreamer picks which replica pods' logs reach the step's stderr and
// hands them to pkg/logs.
type logStreamer struct {
	pods    *logs.PodStreamer
	mode    logs.Mode
	job     *v1alpha1.TrainJob
	types   map[string]v1alpha1.ReplicaType // label value → type
	leaders map[frameworks.ReplicaRef]bool
}

func newLogStreamer(cfg *Config, conn *connection, job *v1alpha1.TrainJob, log *zap.Logger) *logStreamer {
	s := &logStreamer{mode: cfg.Logs, job: job, types: map[string]v1alpha1.ReplicaType{}, leaders: map[frameworks.ReplicaRef]bool{}}
	if cfg.Logs == logs.ModeNone {
		return s
	}
	s.pods = logs.NewPodStreamer(conn.client, conn.namespace, logs.NewPrefixer(cfg.Stderr), log)
	for t := range job.Spec.ReplicaSpecs {
		s.types[strings.ToLower(string(t))] = t
	}
	for _, ref := range frameworks.Leaders(job) {
		s.leaders[ref] = true
	}
	return s
}

// observe is called with every replica pod the controller sees.
func (s *logStreamer) observe(pod *corev1.Pod) {
	if s.pods == nil {
		return
	}
	t, ok := s.types[pod.Labels[v1alpha1.LabelReplicaType]]
	index, err := strconv.Atoi(pod.Labels[v1alpha1.LabelReplicaIndex])
	if !ok || err != nil {
		return
	}
	if !s.mode.Selects(s.leaders[frameworks.ReplicaRef{Type: t, Index: index}]) {
		return
	}
	container := ""
	if main := v1alpha1.MainContainer(s.job, t); main != nil {
		container = main.Name
	}
	s.pods.Observe(pod, logs.ReplicaPrefix(string(t), index), container)
}

func (s *logStreamer) stop(ctx context.Context) {
	if s.pods != nil {
		s.pods.Stop(ctx)
	}
}
