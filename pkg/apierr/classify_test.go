package apierr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

var pods = schema.GroupResource{Resource: "pods"}

// quotaError is the API server's answer when a ResourceQuota is full.
func quotaError() error {
	return apierrors.NewForbidden(pods, "w-0", errors.New("exceeded quota: team-a, requested: pods=1, used: pods=3, limited: pods=3"))
}

func statusError(code int32, reason metav1.StatusReason, message string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message}}
}

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{}}
	refused.Err = syscall.ECONNREFUSED
	cases := []struct {
		name                        string
		err                         error
		transient, quota, permanent bool
	}{
		{"quota", quotaError(), true, true, false},
		{"quota not yet computed", apierrors.NewForbidden(pods, "w-0", errors.New("status unknown for quota: team-a")), true, true, false},
		{"missing right", apierrors.NewForbidden(pods, "w-0", errors.New(`User "x" cannot create resource "pods"`)), false, false, true},
		{"500", apierrors.NewInternalError(errors.New("boom")), true, false, false},
		{"503", apierrors.NewServiceUnavailable("upgrading"), true, false, false},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true, false, false},
		{"504", apierrors.NewTimeoutError("took too long", 1), true, false, false},
		{"etcd leader changed in a 500 without a reason", statusError(500, "", "etcdserver: leader changed"), true, false, false},
		{"a bare 502", statusError(502, "", "bad gateway"), true, false, false},
		{"connection refused", fmt.Errorf("Post https://x: %w", refused), true, false, false},
		{"unauthorized", apierrors.NewUnauthorized("token expired"), false, false, true},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "w-0", nil), false, false, true},
		{"bad request", apierrors.NewBadRequest("no"), false, false, true},
		{"not found", apierrors.NewNotFound(pods, "w-0"), false, false, false},
		{"conflict", apierrors.NewConflict(pods, "w-0", errors.New("precondition")), false, false, false},
		{"cancelled", context.Canceled, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsTransient(tc.err); got != tc.transient {
				t.Errorf("IsTransient = %v, want %v", got, tc.transient)
			}
			if got := IsQuotaExceeded(tc.err); got != tc.quota {
				t.Errorf("IsQuotaExceeded = %v, want %v", got, tc.quota)
			}
			if got := IsPermanent(tc.err); got != tc.permanent {
				t.Errorf("IsPermanent = %v, want %v", got, tc.permanent)
			}
		})
	}
}

func TestRetryRetriesTransientErrorsOnly(t *testing.T) {
	defer func(b wait.Backoff) { WriteBackoff = b }(WriteBackoff)
	WriteBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}
	cases := []struct {
		name      string
		failures  []error
		wantCalls int
		wantErr   bool
	}{
		{"two 500s then success", []error{apierrors.NewInternalError(errors.New("x")), apierrors.NewInternalError(errors.New("x"))}, 3, false},
		{"a 403 is not retried", []error{apierrors.NewForbidden(pods, "w", errors.New("no"))}, 1, true},
		{"a full quota is left to the caller", []error{quotaError()}, 1, true},
		{"503s past the backoff", []error{
			apierrors.NewServiceUnavailable("a"), apierrors.NewServiceUnavailable("a"), apierrors.NewServiceUnavailable("a"),
			apierrors.NewServiceUnavailable("a"), apierrors.NewServiceUnavailable("a"), apierrors.NewServiceUnavailable("a")}, 5, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := Retry(context.Background(), func() error {
				calls++
				if calls <= len(tc.failures) {
					return tc.failures[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Errorf("calls %d, err %v; want %d calls, error %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}

func TestRetryStopsWaitingWhenTheContextEnds(t *testing.T) {
	defer func(b wait.Backoff) { WriteBackoff = b }(WriteBackoff)
	// A wait far longer than the test: only the context's end can cut it.
	WriteBackoff = wait.Backoff{Duration: time.Hour, Factor: 1, Steps: 5}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- Retry(ctx, func() error {
			calls++
			time.AfterFunc(10*time.Millisecond, cancel)
			return apierrors.NewServiceUnavailable("injected")
		})
	}()
	select {
	case err := <-done:
		if calls != 1 || !apierrors.IsServiceUnavailable(err) {
			t.Errorf("calls %d, err %v; want 1 call and the write's own 503", calls, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Retry still waiting for its next attempt after the context ended")
	}
}
