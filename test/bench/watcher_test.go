package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A watcher that saw everything and exited before Seen was called still
// reports when it saw it.
func TestWatcherSeenAfterTheWatcherExited(t *testing.T) {
	w, err := StartWatcher([]string{"sh", "-c", `echo watching; echo seen 1234567890`, "watcher"}, "kubeconfig", "ns", 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	time.Sleep(300 * time.Millisecond) // the process has exited by now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	at, err := w.Seen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(0, 1234567890); !at.Equal(want) {
		t.Errorf("seen at %v, want %v", at, want)
	}
}

func TestWatcherThatEndsWithoutSeeingSaysSo(t *testing.T) {
	w, err := StartWatcher([]string{"sh", "-c", `echo watching; echo "lost the watch" >&2; exit 3`, "watcher"}, "kubeconfig", "ns", 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.Seen(ctx); err == nil || !strings.Contains(err.Error(), "lost the watch") {
		t.Errorf("Seen: %v, want the watcher's stderr", err)
	}
}
