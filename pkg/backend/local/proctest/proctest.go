// Package proctest helps tests check that the local backend left no
// process behind. It is for tests only: production code must not import it.
package proctest

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// LiveInGroup lists the processes of a process group that are still
// alive. Zombies do not count: they have ended, and reaping them is the
// system init's business, not trainstep's. Without /proc (macOS) it can
// only tell whether the group has any member, and returns its id if so.
func LiveInGroup(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		if syscall.Kill(-pgid, 0) == nil {
			return []int{pgid}
		}
		return nil
	}
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces, so read after ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 3 {
			continue
		}
		state, group := fields[0], fields[2]
		if group == strconv.Itoa(pgid) && state != "Z" && state != "X" {
			live = append(live, pid)
		}
	}
	return live
}

// AssertNoneLeft fails the test for every group in pgids that still has a
// live process, and kills what it finds. No groups at all is a failure
// too: the test could not tell anything.
func AssertNoneLeft(t testing.TB, pgids []int) {
	t.Helper()
	if len(pgids) == 0 {
		t.Fatal("no process group was recorded: cannot tell whether processes were left behind")
	}
	for _, pgid := range pgids {
		if live := LiveInGroup(pgid); len(live) > 0 {
			t.Errorf("process group %d still has live processes %v", pgid, live)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// Alive reports whether process pid exists and has not ended (a zombie
// has). Without /proc it can only tell whether the pid exists.
func Alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) && syscall.Kill(pid, 0) == nil
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
