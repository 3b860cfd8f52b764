package testutil

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Condition is what Eventually polls: a plain check, a check that can
// fail (its last error is reported on time-out), or one that also takes
// the poll's context.
type Condition interface {
	func() bool | func() (bool, error) | func(context.Context) (bool, error)
}

// Eventually polls cond until it holds and fails t when it has not within
// timeout, naming what it waited for and the condition's last error. An
// error from cond does not end the wait: the next poll may succeed.
// describe, when given, adds what the test saw last to the failure.
//
// The poll interval follows the timeout (a five-hundredth of it, 5 ms to
// 250 ms), so a wait on an in-process fake is quick and one on a cluster
// does not flood its API server.
func Eventually[C Condition](t testing.TB, timeout time.Duration, what string, cond C, describe ...func() string) {
	t.Helper()
	var check func(context.Context) (bool, error)
	switch c := any(cond).(type) {
	case func() bool:
		check = func(context.Context) (bool, error) { return c(), nil }
	case func() (bool, error):
		check = func(context.Context) (bool, error) { return c() }
	case func(context.Context) (bool, error):
		check = c
	}
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval(timeout), timeout, true, func(ctx context.Context) (bool, error) {
		// A condition that holds ends the wait even with an error beside it
		// (NotFound is what a wait for a deletion wants); an error alone is
		// kept for the report.
		ok, err := check(ctx)
		if err != nil {
			lastErr = err
		}
		return ok, nil
	})
	if err == nil {
		return
	}
	msg := fmt.Sprintf("timed out after %s waiting for %s", timeout, what)
	if lastErr != nil {
		msg += fmt.Sprintf(" (last error: %v)", lastErr)
	}
	for _, d := range describe {
		msg += "; " + d()
	}
	t.Fatal(msg)
}

func pollInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/500, 5*time.Millisecond), 250*time.Millisecond)
}
