package cluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/test/cluster"
)

// kwok may delete a pod only once it is being deleted, as a kubelet does: a
// delete by kwok of a pod nobody is deleting — what a stray second delete
// by name does to a replacement — is refused. Anyone else may still delete.
func TestKWOKCannotDeleteAPodNobodyIsDeleting(t *testing.T) {
	c := cluster.Get(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "replacement"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "train:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	asKWOK := rest.CopyConfig(c.Config)
	asKWOK.Impersonate = rest.ImpersonationConfig{UserName: "kwok", Groups: []string{"system:masters"}}
	kwok, err := kubernetes.NewForConfig(asKWOK)
	if err != nil {
		t.Fatal(err)
	}
	dryRun := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	// The API server takes up an admission policy within seconds of its creation.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = kwok.CoreV1().Pods(ns).Delete(ctx, pod.Name, dryRun)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Fatalf("kwok deleting a pod nobody is deleting: err %v, want refused", err)
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, dryRun); err != nil {
		t.Errorf("the admin deleting the pod: %v, want allowed", err)
	}
}
