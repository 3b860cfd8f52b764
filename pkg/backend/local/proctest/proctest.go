// Package proctest helps tests check that the local backend left no
// process behind. It is for tests only: production code must not import it.
package proctest

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/trainstep/trainstep/internal/procfs"
)

// AssertNoneLeft fails the test for every group in pgids that still has a
// live process, and kills what it finds. No groups at all is a failure
// too: the test could not tell anything.
func AssertNoneLeft(t testing.TB, pgids []int) {
	t.Helper()
	if len(pgids) == 0 {
		t.Fatal("no process group was recorded: cannot tell whether processes were left behind")
	}
	for _, pgid := range pgids {
		if live := procfs.LiveInGroup(pgid); len(live) > 0 {
			t.Errorf("process group %d still has live processes %v", pgid, live)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// Alive reports whether process pid exists and has not ended (a zombie
// has). Without /proc it can only tell whether the pid exists.
func Alive(pid int) bool {
	p, err := procfs.Stat(pid)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) && syscall.Kill(pid, 0) == nil
	}
	return !p.Ended()
}
