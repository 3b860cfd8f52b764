package testutil

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeT records how a helper ended a test, instead of ending this one.
type fakeT struct {
	testing.TB
	failed, skipped string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatal(args ...any) {
	f.failed = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeT) Skip(args ...any) {
	f.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls helper with a fakeT on a goroutine of its own, which
// Fatal and Skip end.
func run(t *testing.T, helper func(testing.TB)) *fakeT {
	f := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		helper(f)
	}()
	<-done
	return f
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	polls := 0
	f := run(t, func(tb testing.TB) {
		Eventually(tb, 5*time.Second, "the third poll", func() (bool, error) {
			polls++
			if polls < 3 {
				return false, errors.New("not yet")
			}
			return true, nil
		})
	})
	if f.failed != "" || polls != 3 {
		t.Errorf("failed %q after %d polls, want success at the third", f.failed, polls)
	}
}

// A condition that holds with an error beside it (a wait for a deletion
// that sees NotFound) is done.
func TestEventuallyTakesAHoldingConditionWithItsError(t *testing.T) {
	polls := 0
	f := run(t, func(tb testing.TB) {
		Eventually(tb, 5*time.Second, "the pod to be gone", func() (bool, error) {
			polls++
			return true, errors.New(`pods "trainer" not found`)
		})
	})
	if f.failed != "" || polls != 1 {
		t.Errorf("failed %q after %d polls, want success at the first", f.failed, polls)
	}
}

func TestEventuallyFailsAtTheTimeoutSayingWhatAndWhy(t *testing.T) {
	started := time.Now()
	f := run(t, func(tb testing.TB) {
		Eventually(tb, 100*time.Millisecond, "a pod", func(context.Context) (bool, error) {
			return false, errors.New("pods is forbidden")
		}, func() string { return "seen: nothing" })
	})
	if elapsed := time.Since(started); elapsed < 100*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("gave up after %s, want at the 100ms timeout", elapsed)
	}
	for _, want := range []string{"waiting for a pod", "pods is forbidden", "seen: nothing"} {
		if !strings.Contains(f.failed, want) {
			t.Errorf("failure %q does not say %q", f.failed, want)
		}
	}
}
