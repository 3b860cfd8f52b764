package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/trainstep/trainstep/pkg/result"
)

func TestRetryTransientRetriesUntilTheTimeoutHasPassed(t *testing.T) {
	start := time.Now()
	calls := 0
	err := retryTransient(context.Background(), 700*time.Millisecond, func() error {
		calls++
		return errors.New("dial tcp 127.0.0.1:1: connection refused")
	})
	if elapsed := time.Since(start); elapsed < 700*time.Millisecond {
		t.Errorf("gave up after %s, before the 700ms timeout", elapsed)
	}
	if result.PhaseOf(err) != result.PhaseTransient || calls < 2 {
		t.Errorf("err %v after %d calls, want Transient after retries", err, calls)
	}
}

func TestRetryTransientStopsAtOnceOnAPermanentError(t *testing.T) {
	calls := 0
	err := retryTransient(context.Background(), time.Minute, func() error {
		calls++
		return backoff.Permanent(result.Invalid(result.ReasonUnauthorized, errors.New("401")))
	})
	if result.PhaseOf(err) != result.PhaseInvalid || calls != 1 {
		t.Errorf("err %v after %d calls, want Invalid after one call", err, calls)
	}
}
