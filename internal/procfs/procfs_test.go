package procfs

import (
	"os"
	"syscall"
	"testing"
)

func TestParseStatReadsAfterTheCommand(t *testing.T) {
	got, err := parseStat(42, []byte("42 (a (weird) name) Z 7 9 9 0 -1 4194560 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Process{PID: 42, PPID: 7, PGID: 9, State: "Z"}); got != want || !got.Ended() {
		t.Errorf("parseStat = %+v (ended %v), want %+v ended", got, got.Ended(), want)
	}
	if _, err := parseStat(1, []byte("1 (init")); err == nil {
		t.Error("a line without the command's closing parenthesis must be an error")
	}
}

func TestListHoldsThisProcessWithItsParentAndGroup(t *testing.T) {
	procs, err := List()
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	pgid, _ := syscall.Getpgid(0)
	for _, p := range procs {
		if p.PID == os.Getpid() {
			if p.PPID != os.Getppid() || p.PGID != pgid || p.Ended() {
				t.Errorf("this process listed as %+v, want parent %d, group %d, running", p, os.Getppid(), pgid)
			}
			return
		}
	}
	t.Errorf("this process (%d) is not among the %d listed", os.Getpid(), len(procs))
}
