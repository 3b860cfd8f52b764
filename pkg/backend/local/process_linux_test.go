package local

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/trainstep/trainstep/internal/procfs"
)

func TestWaitGroupEndedWaitsForTheLiveAndNotForZombies(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL); _ = cmd.Wait() })

	began := time.Now()
	waitGroupEnded(pgid, 300*time.Millisecond)
	if waited := time.Since(began); waited < 300*time.Millisecond {
		t.Errorf("returned after %s with the group's process alive, want the whole 300ms", waited)
	}
	if live := procfs.LiveInGroup(pgid); len(live) == 0 {
		t.Fatal("the process ended by itself: the wait above tested nothing")
	}

	// Killed and not reaped, it is a zombie: ended.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	waitGroupEnded(pgid, time.Minute)
	if live := procfs.LiveInGroup(pgid); len(live) > 0 {
		t.Errorf("returned with %v alive", live)
	}
}
