package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeMonitorPeriod is how often the node lifecycle controller looks at the nodes' heartbeats
// when Options.NodeMonitorGracePeriod is set (Kubernetes' default is 5s).
const nodeMonitorPeriod = 2 * time.Second

// nodeLifecycleFlags shorten kube-controller-manager's node lifecycle to
// Options.NodeMonitorGracePeriod; none without it.
func (c *Cluster) nodeLifecycleFlags() []string {
	if c.nodeGrace <= 0 {
		return nil
	}
	return []string{
		"--node-monitor-grace-period=" + c.nodeGrace.String(),
		"--node-monitor-period=" + nodeMonitorPeriod.String(),
	}
}

// nodeLeaseSeconds is the real nodes' Lease duration under a short
// Options.NodeMonitorGracePeriod: the kubelet renews its Lease every quarter of it, so a
// grace period holds four renewals and one late renewal on a busy machine does not mark a
// live node NotReady. 0 keeps the kubelet's default (40s, renewed every 10s).
func (c *Cluster) nodeLeaseSeconds() int {
	if c.nodeGrace <= 0 {
		return 0
	}
	return max(4, int(c.nodeGrace/time.Second))
}

// realNodeNamed finds the cluster's real node called name.
func (c *Cluster) realNodeNamed(name string) (*realNode, error) {
	for _, n := range c.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the cluster has no real node %q", name)
}

// nodeComponentsOf lists n's running components among binaries.
func (c *Cluster) nodeComponentsOf(n *realNode, binaries ...string) []*component {
	var comps []*component
	for _, comp := range c.components {
		for _, b := range binaries {
			if comp.name == n.component(b) {
				comps = append(comps, comp)
			}
		}
	}
	return comps
}

// signalNode sends sig to the process groups of n's components among binaries.
func (c *Cluster) signalNode(n *realNode, sig syscall.Signal, binaries ...string) {
	for _, comp := range c.nodeComponentsOf(n, binaries...) {
		if comp.pgid > 0 {
			_ = syscall.Kill(-comp.pgid, sig)
		}
	}
}

// KillRealNode makes the real node name die as a machine that loses its power: its link goes
// down first, so that nothing its dying processes send (a FIN, a reset) reaches a peer, then
// every process of the node gets SIGKILL: the kubelet, containerd, kube-proxy, CoreDNS, the
// containers' shims and the containers; their mounts go too. The Node object stays, and
// nothing renews its Lease: the node lifecycle controller marks it NotReady after
// Options.NodeMonitorGracePeriod, taints it node.kubernetes.io/unreachable and marks its pods
// not Ready, as it would for a lost machine. RestartRealNode brings it back; DeleteNode
// deletes the Node object as a cloud provider's node controller would.
func (c *Cluster) KillRealNode(name string) error {
	n, err := c.realNodeNamed(name)
	if err != nil {
		return err
	}
	if c.detached {
		return fmt.Errorf("killing real node %s: not in a detached cluster", name)
	}
	if err := run("ip", "-n", n.Network.Namespace, "link", "set", "eth0", "down"); err != nil {
		return fmt.Errorf("taking real node %s off the network: %w", name, err)
	}
	n.down = true
	comps := c.nodeComponentsOf(n, nodeBinaries...)
	for _, comp := range comps {
		_ = syscall.Kill(-comp.pgid, syscall.SIGKILL)
	}
	for _, comp := range comps {
		select {
		case <-comp.exited:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("killing real node %s: %s still runs 10s after SIGKILL", name, comp.name)
		}
	}
	// The components are gone for good: a wait on the cluster's components must not fail on
	// them, nor Stop signal their process groups, whose ids may be reused.
	c.components = slices.DeleteFunc(slices.Clone(c.components), func(comp *component) bool { return slices.Contains(comps, comp) })
	errs := []error{n.killNodeProcesses()}
	errs = append(errs, n.unmountAll())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("killing real node %s: %w", name, err)
	}
	return nil
}

// PartitionRealNode stops the kubelet and containerd of the real node name with SIGSTOP: the
// node stops answering the control plane while its containers go on running and reaching
// each other, as in a network partition between the node and the control plane. HealRealNode
// lets them go on.
func (c *Cluster) PartitionRealNode(name string) error {
	return c.signalNamedNode(name, syscall.SIGSTOP)
}

// HealRealNode ends PartitionRealNode: the kubelet and containerd go on (SIGCONT), the kubelet
// renews its Lease and reports its node and pods Ready again.
func (c *Cluster) HealRealNode(name string) error {
	return c.signalNamedNode(name, syscall.SIGCONT)
}

func (c *Cluster) signalNamedNode(name string, sig syscall.Signal) error {
	n, err := c.realNodeNamed(name)
	if err != nil {
		return err
	}
	if n.down {
		return fmt.Errorf("signalling real node %s: it is killed", name)
	}
	comps := c.nodeComponentsOf(n, "kubelet", "containerd")
	if len(comps) != 2 {
		return fmt.Errorf("signalling real node %s: found %d of its kubelet and containerd", name, len(comps))
	}
	for _, comp := range comps {
		if err := syscall.Kill(-comp.pgid, sig); err != nil {
			return fmt.Errorf("sending %s to %s: %w", sig, comp.name, err)
		}
	}
	return nil
}

// RestartRealNode brings back the real node name after KillRealNode, as a machine that boots
// again: its link comes up with its routes, containerd (with the images it had), the kubelet,
// kube-proxy and CoreDNS start (and Argo's workflow controller, when it ran there), and it
// returns once the node is Ready and schedulable. A deleted Node object is registered again
// by the kubelet.
func (c *Cluster) RestartRealNode(ctx context.Context, name string) error {
	n, err := c.realNodeNamed(name)
	if err != nil {
		return err
	}
	if !n.down {
		return fmt.Errorf("restarting real node %s: it is not killed", name)
	}
	if err := run("ip", "-n", n.Network.Namespace, "link", "set", "eth0", "up"); err != nil {
		return fmt.Errorf("bringing real node %s back on the network: %w", name, err)
	}
	if err := routeNode(c.nodes, slices.Index(c.nodes, n)); err != nil {
		return err
	}
	if err := c.startRealNode(ctx, n); err != nil {
		return fmt.Errorf("restarting real node %s: %w", name, err)
	}
	n.down = false
	if c.argo && n == c.nodes[0] {
		if err := c.startArgoController(ctx); err != nil {
			return fmt.Errorf("restarting real node %s: %w", name, err)
		}
	}
	return nil
}

// DeleteNode deletes the Node object name, as a cloud provider's node controller does for a
// machine that is gone, and waits until it is gone. The pod garbage collector then marks the
// node's pods DisruptionTarget and deletes them at once (forced: no kubelet confirms).
func (c *Cluster) DeleteNode(ctx context.Context, name string) error {
	if err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	gone := func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	return waitFor(ctx, "node "+name+" to be deleted", nil, gone)
}
