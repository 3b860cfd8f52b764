package executor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	authorizationv1 "k8s.io/api/authorization/v1"

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

func TestAllowedByRulesFollowsRBACWildcards(t *testing.T) {
	rules := []authorizationv1.ResourceRule{
		{Verbs: []string{"create", "get"}, APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}},
		{Verbs: []string{"*"}, APIGroups: []string{"scheduling.x-k8s.io"}, Resources: []string{"*"}},
		{Verbs: []string{"delete"}, APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{"only-this"}},
	}
	cases := []struct {
		p    permission
		want bool
	}{
		{permission{verb: "create", resource: "pods"}, true},
		{permission{verb: "get", resource: "pods", subresource: "log"}, true},
		{permission{verb: "delete", resource: "pods"}, false},
		{permission{verb: "patch", group: "scheduling.x-k8s.io", resource: "podgroups"}, true},
		{permission{verb: "create", group: "scheduling.volcano.sh", resource: "podgroups"}, false},
		{permission{verb: "delete", resource: "services"}, false}, // granted on one name only
	}
	for _, tc := range cases {
		if got := allowedByRules(rules, tc.p); got != tc.want {
			t.Errorf("allowedByRules(%s) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestRunAtMostBoundsTheProbesInFlightAndKeepsTheirOrder(t *testing.T) {
	var inFlight, most atomic.Int32
	probes := make([]func() error, 10)
	for i := range probes {
		probes[i] = func() error {
			n := inFlight.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			inFlight.Add(-1)
			if i == 7 || i == 4 {
				return fmt.Errorf("probe %d", i)
			}
			return nil
		}
	}
	errs := runAtMost(3, probes)
	if most.Load() > 3 || most.Load() < 2 {
		t.Errorf("at most %d probes were in flight at once, want up to 3", most.Load())
	}
	if err := firstInOrder(errs); err == nil || err.Error() != "probe 4" {
		t.Errorf("first error in order = %v, want probe 4's", err)
	}
}
