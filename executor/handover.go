package executor

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
)

// A SIGTERM means one of two things to a step. Argo or a person stopping
// the workflow (argo stop, argo terminate, a deadline, a CronWorkflow's
// Replace) wants the job gone: the step tears it down. The infrastructure
// removing the step's own pod — a drain's eviction, a preemption, a
// node's graceful shutdown, a taint — has nothing against the job: the
// step hands it over to its retry (exit 12, every replica kept), which
// re-attaches. The two are told apart by the step pod's DisruptionTarget
// condition, which the API server, the scheduler, the taint manager and
// the kubelet set before they remove a pod, and which stopping a workflow
// never sets.

// disruptionLookup bounds the read of the step's own pod after a signal:
// the grace period is for the teardown.
const disruptionLookup = 3 * time.Second

// stopKind is what a signal asked of the step, worked out once.
type stopKind struct {
	once sync.Once
	// disruption is the step pod's DisruptionTarget reason and message,
	// "" when the signal is a stop.
	disruption string
}

// classify reads the step's own pod once and records whether the
// infrastructure is removing it; conn may be nil before the run
// connected, and then a connection is made for the read.
func (k *stopKind) classify(cfg *Config, namespace string, conn *connection) {
	k.once.Do(func() {
		if cfg.OwnerPod == "" {
			return // the step knows no pod of its own: a signal is a stop
		}
		if conn == nil {
			c, err := connect(cfg, namespace)
			if err != nil {
				cfg.Logger.Warn("reading the step's pod after the signal: no client; stopping the job", zap.Error(err))
				return
			}
			conn = c
		}
		ctx, cancel := context.WithTimeout(context.Background(), disruptionLookup)
		defer cancel()
		pod, err := conn.core.Pods(conn.namespace).Get(ctx, cfg.OwnerPod, metav1.GetOptions{})
		if err != nil {
			cfg.Logger.Warn("reading the step's pod after the signal failed; taking the signal as a stop", zap.Error(err))
			return
		}
		if string(pod.UID) != cfg.OwnerUID && cfg.OwnerUID != "" {
			return
		}
		k.disruption = podDisruption(pod)
		if k.disruption != "" {
			cfg.Logger.Warn("the step's own pod is being removed by the infrastructure: handing the job over to the step's retry", zap.String("disruption", k.disruption))
		}
	})
}

// handOver reports whether the signal was the step pod's disruption.
func (k *stopKind) handOver() bool { return k != nil && k.disruption != "" }

// reason is the step pod's disruption, "" for a stop.
func (k *stopKind) reason() string {
	if k == nil {
		return ""
	}
	return k.disruption
}

// podDisruption is pod's DisruptionTarget condition as "reason: message",
// "" when it has none that is true.
func podDisruption(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1alpha1.PodConditionDisruptionTarget && c.Status == corev1.ConditionTrue {
			if c.Message == "" {
				return c.Reason
			}
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}
