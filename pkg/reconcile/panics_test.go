package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/result"
)

// panicsOnce returns a reactor that panics with message the first time it
// is called and lets every later call through.
func panicsOnce(message string) k8stesting.ReactionFunc {
	var fired atomic.Bool
	return func(k8stesting.Action) (bool, runtime.Object, error) {
		if fired.CompareAndSwap(false, true) {
			panic(message)
		}
		return false, nil, nil
	}
}

// wantInternalError waits for Run's error: a Failed InternalError naming
// the panic. The test goes on running: the process survived it.
func wantInternalError(t *testing.T, h *harness, message string) {
	t.Helper()
	select {
	case err := <-h.runErr:
		var re *result.Error
		if !errors.As(err, &re) || re.Phase != result.PhaseFailed || re.Reason != result.ReasonInternalError || !strings.Contains(err.Error(), message) {
			t.Fatalf("Run: %v, want a Failed InternalError naming %q", err, message)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not end after the panic")
	}
}

// wantTornDown tears the job down after the panic, as the executor does,
// and checks nothing of it is left.
func wantTornDown(t *testing.T, h *harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	left, err := h.ctrl.Cleanup(ctx, true, true)
	if err != nil || len(left) > 0 {
		t.Fatalf("teardown after the panic: left %v, %v", left, err)
	}
	pods, _ := h.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	svcs, _ := h.client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if len(pods.Items)+len(svcs.Items) != 0 {
		t.Errorf("after the teardown: %d pods, %d services", len(pods.Items), len(svcs.Items))
	}
}

func TestAPanicInACreateEndsTheRunAsAnInternalError(t *testing.T) {
	h := startWith(t, tfJob(v1alpha1.RestartPolicyNever), func(h *harness, _ *Options) {
		h.runErr = make(chan error, 1)
		h.client.PrependReactor("create", "pods", panicsOnce("injected in a create"))
	})
	wantInternalError(t, h, "injected in a create")
	wantTornDown(t, h)
}

func TestAPanicInADeleteEndsTheRunAsAnInternalError(t *testing.T) {
	h := startWith(t, tfJob(v1alpha1.RestartPolicyExitCode), func(h *harness, _ *Options) {
		h.runErr = make(chan error, 1)
		h.client.PrependReactor("delete", "pods", panicsOnce("injected in a delete"))
	})
	// A retryable exit: the controller deletes the failed pod to recreate it.
	h.setStatus("mnist-worker-1", corev1.PodFailed, 137)
	wantInternalError(t, h, "injected in a delete")
	wantTornDown(t, h)
}

func TestAPanicInAnInformerHandlerEndsTheRunAsAnInternalError(t *testing.T) {
	var fired atomic.Bool
	h := startWith(t, tfJob(v1alpha1.RestartPolicyNever), func(h *harness, o *Options) {
		h.runErr = make(chan error, 1)
		o.OnPod = func(pod *corev1.Pod) {
			if pod.Status.Phase == corev1.PodRunning && fired.CompareAndSwap(false, true) {
				panic("injected in OnPod")
			}
		}
	})
	h.setStatus("mnist-worker-0", corev1.PodRunning, 0)
	wantInternalError(t, h, "injected in OnPod")
	wantTornDown(t, h)
}

// TestAPanicInTheTeardownIsAnError: a delete that panics during Cleanup
// makes Cleanup fail, not the process.
func TestAPanicInTheTeardownIsAnError(t *testing.T) {
	h := startWith(t, tfJob(v1alpha1.RestartPolicyNever), func(h *harness, _ *Options) {
		h.runErr = make(chan error, 1)
		h.client.PrependReactor("create", "pods", panicsOnce("injected in a create"))
	})
	// Cleanup runs once Run is over, as in the executor.
	wantInternalError(t, h, "injected in a create")
	h.client.PrependReactor("delete", "*", func(k8stesting.Action) (bool, runtime.Object, error) { panic("injected in the teardown") })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := h.ctrl.Cleanup(ctx, true, false)
	if err == nil || !strings.Contains(err.Error(), "injected in the teardown") {
		t.Fatalf("Cleanup: %v, want the panic as its error", err)
	}
}
