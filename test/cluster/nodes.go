package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// ResourceGPU is the extended resource KWOK nodes offer for accelerators.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// nodeReadyTimeout bounds how long AddNode waits for kwok and the node lifecycle controller.
const nodeReadyTimeout = 2 * time.Minute

// NodeSpec describes a KWOK node for Options.Nodes.
type NodeSpec struct {
	Name     string
	Capacity corev1.ResourceList
	Options  []NodeOption
}

// NodeOption adjusts a node before AddNode creates it.
type NodeOption func(*corev1.Node)

// WithNodeLabels adds labels to the node (e.g. for nodeSelector tests).
func WithNodeLabels(labels map[string]string) NodeOption {
	return func(n *corev1.Node) {
		for k, v := range labels {
			n.Labels[k] = v
		}
	}
}

// WithNodeTaints puts taints on the node.
func WithNodeTaints(taints ...corev1.Taint) NodeOption {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, taints...) }
}

// NodeCapacity builds a capacity: cpu cores, memory ("32Gi"), pod slots and GPUs.
func NodeCapacity(cpu, memory string, pods, gpus int64) corev1.ResourceList {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	if gpus > 0 {
		capacity[ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return capacity
}

// DefaultNodes are the nodes of the shared test cluster and of `make cluster-up`: four
// untainted nodes of 8 cpu, 32Gi, 110 pods and 8 nvidia.com/gpu each.
func DefaultNodes() []NodeSpec {
	nodes := make([]NodeSpec, 4)
	for i := range nodes {
		nodes[i] = NodeSpec{Name: fmt.Sprintf("kwok-node-%d", i), Capacity: NodeCapacity("8", "32Gi", 110, 8)}
	}
	return nodes
}

// AddNode creates a KWOK node with the given capacity (also its allocatable) and waits
// until it is Ready and the node lifecycle controller has lifted its not-ready taint, so
// the scheduler places pods on it.
func (c *Cluster) AddNode(ctx context.Context, name string, capacity corev1.ResourceList, opts ...NodeOption) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
				"type":                 "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity.DeepCopy(), Allocatable: capacity.DeepCopy()},
	}
	for _, opt := range opts {
		opt(node)
	}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, nodeReadyTimeout)
	defer cancel()
	schedulable := func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeSchedulable(n), nil
	}
	if err := waitFor(ctx, "node "+name+" to be Ready", c.components, schedulable); err != nil {
		return err
	}
	return nil
}

// nodeSchedulable: Ready, and free of the taints the node lifecycle controller puts on
// nodes that are not (yet) ready or reachable.
func nodeSchedulable(n *corev1.Node) bool {
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready
}

// addNodes creates nodes concurrently.
func (c *Cluster) addNodes(ctx context.Context, nodes []NodeSpec) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, spec := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.AddNode(ctx, spec.Name, spec.Capacity, spec.Options...); !apierrors.IsAlreadyExists(err) {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// LoseNode makes a node look lost, as the node lifecycle controller shows a
// node whose kubelet stopped answering: each of its pods' Ready condition
// goes False while their containers still show running (MarkPodsNotReady),
// and nothing new is scheduled there. KWOK v0.7 keeps the node Ready and
// renews its Lease whatever its annotation or holder, so the test plays the
// controller's part; and since the controller takes its own unreachable
// taint off a Ready node, a taint of the test's (LostNodeTaint) keeps pods
// away. The node is not cordoned: a cordon is a drain's notice.
func (c *Cluster) LoseNode(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: LostNodeTaint, Effect: corev1.TaintEffectNoSchedule})
		_, err = c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("tainting node %s lost: %w", name, err)
	}
	pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		return fmt.Errorf("listing the pods of node %s: %w", name, err)
	}
	now := metav1.Now()
	for i := range pods.Items {
		pod := &pods.Items[i]
		// The pod's own controllers write it too: a conflict reads it again.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for j := range live.Status.Conditions {
				if cond := &live.Status.Conditions[j]; cond.Type == corev1.PodReady {
					cond.Status, cond.LastTransitionTime = corev1.ConditionFalse, now
				}
			}
			_, err = c.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, live, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("marking pod %s not Ready: %w", pod.Name, err)
		}
	}
	return nil
}

// LostNodeTaint keeps pods off a node LoseNode lost.
const LostNodeTaint = "test.trainstep.dev/lost"
