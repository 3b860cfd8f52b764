package executor

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
)

// CleanupConfig is what `trainstep cleanup` needs: the workflow whose
// jobs it ends (proven like a step's identity, from the pod its token is
// bound to) and how to reach the cluster.
type CleanupConfig struct {
	Kubeconfig      string
	KubeconfigPaths []string
	KubeContext     string
	PodNamespace    string
	// OwnerPod and OwnerUID name the pod the cleanup runs in.
	OwnerPod, OwnerUID string
	// WorkflowUID is the workflow whose replicas are deleted.
	WorkflowUID string
	APITimeout  time.Duration
	Logger      *zap.Logger
}

// CleanupResult says what a cleanup deleted.
type CleanupResult struct {
	Deleted []string `json:"deleted"`
}

// Cleanup deletes every replica pod still running of the jobs a workflow
// ran: the exit handler of the shipped templates calls it when the
// workflow ends, so that no replica outlives its workflow whatever became
// of its step (OOM-killed, its node lost, its retries used up). Only pods
// carrying trainstep's job label whose controller is that workflow are
// touched, by UID; finished pods are left to the garbage collector with the
// workflow, as are the jobs' other objects, which run nothing. The
// workflow is proven, as a step's identity is: the pod the cleanup's token
// is bound to must be controlled by it.
func Cleanup(ctx context.Context, cc CleanupConfig) (CleanupResult, error) {
	if cc.APITimeout <= 0 {
		cc.APITimeout = DefaultAPITimeout
	}
	if cc.Logger == nil {
		cc.Logger = zap.NewNop()
	}
	cfg := &Config{Kubeconfig: cc.Kubeconfig, KubeconfigPaths: cc.KubeconfigPaths, KubeContext: cc.KubeContext, PodNamespace: cc.PodNamespace,
		OwnerPod: cc.OwnerPod, OwnerUID: cc.OwnerUID, WorkflowUID: cc.WorkflowUID, APITimeout: cc.APITimeout, Logger: cc.Logger}
	if cc.WorkflowUID == "" {
		return CleanupResult{}, result.Invalidf("--workflow-uid names the workflow whose replicas are deleted")
	}
	conn, err := connect(cfg, "")
	if err != nil {
		return CleanupResult{}, err
	}
	workflow, err := proveWorkflow(ctx, cfg, conn)
	if err != nil {
		return CleanupResult{}, err
	}
	var pods *corev1.PodList
	selector := v1alpha1.LabelJobName + "," + v1alpha1.LabelWorkflow + "=" + workflow
	err = retryTransient(ctx, cc.APITimeout, func() (err error) {
		pods, err = conn.core.Pods(conn.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return classify(err)
	})
	if err != nil {
		return CleanupResult{}, fmt.Errorf("listing the workflow's replicas: %w", err)
	}
	var res CleanupResult
	for _, pod := range pods.Items {
		ref := metav1.GetControllerOf(&pod)
		if ref == nil || string(ref.UID) != cc.WorkflowUID || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		uid := pod.UID
		err := retryTransient(ctx, cc.APITimeout, func() error {
			err := conn.core.Pods(conn.namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil
			}
			return classify(err)
		})
		if err != nil {
			return res, fmt.Errorf("deleting replica %s: %w", pod.Name, err)
		}
		res.Deleted = append(res.Deleted, pod.Name)
		cc.Logger.Info("deleted a replica its workflow left running", zap.String("pod", pod.Name), zap.String("job", pod.Labels[v1alpha1.LabelJobName]))
	}
	cc.Logger.Info("the workflow's replicas are cleaned up", zap.String("workflow", workflow), zap.Int("deleted", len(res.Deleted)))
	return res, nil
}
