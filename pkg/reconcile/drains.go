package reconcile

import (
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/policy"
)

// A drain gives notice before it evicts anything: the node is cordoned
// (spec.unschedulable, the node.kubernetes.io/unschedulable taint), or an
// autoscaler taints it to be removed. With the rights to watch nodes, the
// controller takes that notice as the disruption of every replica running
// there, at once: a job whose ranks restart as a whole stops every rank
// gracefully together (time to checkpoint) and starts again on other
// nodes, uncounted, so the drain waits for a checkpoint instead of for
// the job's end (the PodDisruptionBudget keeps it from evicting one rank
// alone). Without the rights, a drain waits on that budget.

// drainTaints are the taints that say a node is being emptied.
var drainTaints = map[string]bool{
	"node.kubernetes.io/unschedulable":            true, // kubectl cordon and drain
	"ToBeDeletedByClusterAutoscaler":              true, // the cluster autoscaler's scale-down
	"karpenter.sh/disrupted":                      true, // Karpenter v1
	"karpenter.sh/disruption":                     true, // Karpenter before v1
	"node.kubernetes.io/out-of-service":           true, // a node shut down for good
	"cloud.google.com/impending-node-termination": true, // GKE's notice of a spot reclaim
}

// draining says why node is being emptied, "" when it is not.
func draining(node *corev1.Node) string {
	if node.Spec.Unschedulable {
		return "cordoned"
	}
	for _, t := range node.Spec.Taints {
		if drainTaints[t.Key] {
			return "tainted " + t.Key
		}
	}
	return ""
}

// watchNodes adds the node informer (cluster-scoped, slimmed to name,
// cordon and taints) when the controller may watch nodes.
func (c *Controller) watchNodes() error {
	if !c.opts.WatchNodes {
		return nil
	}
	inf := c.newInformer(listWatch(c.opts.Core.Nodes(), ""), &corev1.Node{})
	_, err := inf.AddEventHandler(c.guarded("the node informer's handler", cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.nodeSeen(obj) },
		UpdateFunc: func(_, obj any) { c.nodeSeen(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if node, ok := obj.(*corev1.Node); ok {
				c.mu.Lock()
				delete(c.drainingNodes, node.Name)
				c.mu.Unlock()
			}
		},
	}))
	if err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	return nil
}

// nodeSeen records whether a node is being drained; the replicas running
// there are looked at again when that changes.
func (c *Controller) nodeSeen(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	why := draining(node)
	c.mu.Lock()
	_, was := c.drainingNodes[node.Name]
	switch {
	case why != "" && !was:
		c.drainingNodes[node.Name] = drainNotice{since: c.opts.Clock.Now(), why: why}
	case why == "" && was:
		delete(c.drainingNodes, node.Name)
	}
	changed := (why != "") != was
	if changed {
		for _, st := range c.replicas {
			if st.pod != nil && st.pod.Spec.NodeName == node.Name {
				st.dirty = true
			}
		}
	}
	c.mu.Unlock()
	if changed {
		c.opts.Logger.Info("a node of the job's replicas is being drained", zap.String("node", node.Name), zap.String("why", why))
		c.enqueue()
	}
}

// drainNotice is when and why a node was first seen being drained.
type drainNotice struct {
	since time.Time
	why   string
}

// drainedAt is when the node a running replica is on was first seen being
// drained, zero when it is not; called with the controller's mutex held.
func (c *Controller) drainedAt(nodeName string) (time.Time, string) {
	if n, ok := c.drainingNodes[nodeName]; ok && nodeName != "" {
		return n.since, n.why
	}
	return time.Time{}, ""
}

// disruptedByDrain marks a running replica on a node being drained as
// disrupted from the notice on, as a DisruptionTarget would: what the
// failure policy does with a disrupted rank it does now, before the drain
// reaches it. Called with the controller's mutex held.
func (c *Controller) disruptedByDrain(r *policy.Replica) {
	if r.Phase != policy.PhaseRunning || !r.DisruptedAt.IsZero() {
		return
	}
	if at, _ := c.drainedAt(r.Node); !at.IsZero() {
		r.DisruptedAt = at
		r.Conditions = append(r.Conditions, string(v1alpha1.PodConditionDisruptionTarget))
	}
}
