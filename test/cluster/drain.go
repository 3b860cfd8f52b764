package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Drain empties a node as `kubectl drain --ignore-daemonsets --delete-emptydir-data` does: it
// cordons the node, then evicts every pod on it through the Eviction API (which honours
// PodDisruptionBudgets: a refused eviction is tried again every second, as kubectl does) and
// waits until they are gone. It returns the pods it evicted when the node is empty, or the
// error that stopped it (ctx's when a budget held the drain). Mirror pods and DaemonSet pods
// stay, as with kubectl.
func Drain(ctx context.Context, client kubernetes.Interface, node string) ([]string, error) {
	if err := Cordon(ctx, client, node, true); err != nil {
		return nil, err
	}
	var evicted []string
	for {
		pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return evicted, fmt.Errorf("listing the pods on %s: %w", node, err)
		}
		var left []string
		for _, p := range pods.Items {
			if drainLeaves(&p) {
				continue
			}
			left = append(left, p.Namespace+"/"+p.Name)
			if p.DeletionTimestamp != nil {
				continue
			}
			eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			err := client.CoreV1().Pods(p.Namespace).EvictV1(ctx, eviction)
			switch {
			case err == nil:
				evicted = append(evicted, p.Namespace+"/"+p.Name)
			case apierrors.IsNotFound(err):
			case apierrors.IsTooManyRequests(err):
				// A PodDisruptionBudget holds it: tried again, as kubectl drain does.
			default:
				return evicted, fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		if len(left) == 0 {
			return evicted, nil
		}
		select {
		case <-ctx.Done():
			return evicted, fmt.Errorf("draining %s: %w; left: %s", node, ctx.Err(), strings.Join(left, ", "))
		case <-time.After(time.Second):
		}
	}
}

// drainLeaves reports the pods a drain leaves on the node: mirror pods, DaemonSet pods and
// pods that already ended.
func drainLeaves(p *corev1.Pod) bool {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
		return true
	}
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Cordon marks a node unschedulable (or schedulable again, with on false).
func Cordon(ctx context.Context, client kubernetes.Interface, node string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordoning %s (%v): %w", node, on, err)
	}
	return nil
}
