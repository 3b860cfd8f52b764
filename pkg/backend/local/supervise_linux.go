package local

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/trainstep/trainstep/internal/procfs"
)

// A replica under a supervisor: trainstep starts a small process of its
// own (trainstep itself, re-executed through a hidden command) that starts
// the replica. The supervisor is a child subreaper, so whatever the
// replica's processes leave behind is re-parented to it rather than to
// init, and it ends all of it when the replica exits or trainstep dies —
// even by SIGKILL, when nothing in trainstep can run. The kernel's
// parent-death signal alone would reach only trainstep's own children.
const canSupervise = true

// Descriptors the supervisor inherits besides stdin, stdout and stderr.
const (
	// lifelineFD is the read end of a pipe only trainstep holds the write
	// end of: end of file means trainstep is gone, however it ended.
	lifelineFD = 3
	// statusFD is where the supervisor reports "started <pid>" or
	// "error <why>", then closes it.
	statusFD = 4
)

// endTimeout bounds how long the supervisor keeps killing what is left:
// a process stuck in uninterruptible sleep cannot be waited for forever.
const endTimeout = 10 * time.Second

// forwardedSignals reach the replica's process group when the supervisor
// receives them, as if the replica had been signalled.
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// startSupervised starts argv under the supervisor command and returns
// once the supervisor reported the replica started (or why it did not).
// The supervisor leads its own process group, so a terminal's Ctrl-C does
// not reach it; the replica leads another, the process's pgid.
func startSupervised(supervisor, argv, env []string, output *os.File) (*process, error) {
	path, err := exec.LookPath(argv[0]) // resolved as os/exec resolves a direct start
	if err != nil {
		return nil, err
	}
	lifelineRead, lifeline, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the supervisor's lifeline: %w", err)
	}
	statusRead, statusWrite, err := os.Pipe()
	if err != nil {
		lifelineRead.Close()
		lifeline.Close()
		return nil, fmt.Errorf("creating the supervisor's status pipe: %w", err)
	}
	args := append(append(slices.Clone(supervisor[1:]), "--", path), argv...)
	cmd := exec.Command(supervisor[0], args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.ExtraFiles = []*os.File{lifelineRead, statusWrite} // lifelineFD, statusFD
	if output != nil {
		cmd.Stdout, cmd.Stderr = output, output
	}
	err = cmd.Start()
	lifelineRead.Close()
	statusWrite.Close()
	if err != nil {
		statusRead.Close()
		lifeline.Close()
		return nil, fmt.Errorf("starting the supervisor %s: %w", supervisor[0], err)
	}
	report, _ := io.ReadAll(io.LimitReader(statusRead, 4096))
	statusRead.Close()
	pid, err := parseSupervisorStatus(report)
	if err != nil {
		waitErr := cmd.Wait()
		lifeline.Close()
		if len(report) == 0 {
			return nil, fmt.Errorf("the supervisor %s ended before starting the command (%v)", supervisor[0], waitErr)
		}
		return nil, err
	}
	return &process{cmd: cmd, pid: pid, pgid: pid, supervisor: cmd.Process.Pid, lifeline: lifeline, exited: make(chan struct{})}, nil
}

// parseSupervisorStatus reads the supervisor's report: the replica's pid,
// or why it could not start.
func parseSupervisorStatus(report []byte) (int, error) {
	line := strings.TrimSpace(string(report))
	if why, ok := strings.CutPrefix(line, "error "); ok {
		return 0, errors.New(why)
	}
	if pid, ok := strings.CutPrefix(line, "started "); ok {
		if n, err := strconv.Atoi(pid); err == nil && n > 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("unexpected report from the supervisor: %q", line)
}

// Supervise is the supervisor's whole life, for trainstep's hidden
// supervise command; args are "--", the command's path and its argv. It
// starts the command in a process group of its own, forwards the signals
// it receives to that group, and when the command exits or trainstep is
// gone, kills the group and every process re-parented to it. Then it ends
// as the command did: with its exit code, or by the same signal (where
// the kernel allows; else with 128 + the signal's number, which trainstep
// reads the same way). It reports failures before the start on statusFD.
func Supervise(args []string) int {
	if err := checkInherited(); err != nil {
		fmt.Fprintln(os.Stderr, "trainstep supervise:", err)
		return exitCodeStartError
	}
	status := os.NewFile(statusFD, "status")
	lifeline := os.NewFile(lifelineFD, "lifeline")
	fail := func(err error) int {
		fmt.Fprintf(status, "error %v\n", err)
		status.Close()
		return exitCodeStartError
	}
	if len(args) < 3 || args[0] != "--" {
		return fail(errors.New("usage: supervise -- PATH ARGV0 [ARG...]"))
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("becoming a child subreaper: %w", err))
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, forwardedSignals...)
	pid, err := syscall.ForkExec(args[1], args[2:], &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		// The replica dies with the supervisor too, should the supervisor
		// itself be killed.
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(status, "started %d\n", pid)
	status.Close()

	replicaExited := make(chan syscall.WaitStatus, 1)
	noChildren := make(chan struct{})
	go reapChildren(pid, replicaExited, noChildren)
	trainstepGone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, lifeline)
		close(trainstepGone)
	}()
	for {
		select {
		case sig := <-signals:
			_ = syscall.Kill(-pid, sig.(syscall.Signal))
		case <-trainstepGone:
			endAll(pid, noChildren)
			return 128 + int(syscall.SIGKILL)
		case ws := <-replicaExited:
			endAll(pid, noChildren)
			if ws.Signaled() {
				dieBySignal(ws.Signal())
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
}

// checkInherited makes sure the descriptors trainstep passes are there and
// are not inherited further by the replica.
func checkInherited() error {
	for _, fd := range []int{lifelineFD, statusFD} {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
			return fmt.Errorf("descriptor %d is not a pipe: this command is started by `trainstep run --local`, not by hand", fd)
		}
		syscall.CloseOnExec(fd)
	}
	return nil
}

// reapChildren waits for every child of the supervisor: the replica, whose
// status it sends, and whatever was re-parented to the subreaper. It
// closes noChildren once there is none left; with no child, a subreaper
// has no descendant either.
func reapChildren(replica int, replicaExited chan<- syscall.WaitStatus, noChildren chan<- struct{}) {
	defer close(noChildren)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if pid == replica && (ws.Exited() || ws.Signaled()) {
			replicaExited <- ws
		}
	}
}

// endAll kills the replica's process group and every child of the
// supervisor — what a dying process leaves is re-parented to it, so this
// reaches descendants that left the group too — until no child is left or
// endTimeout has passed.
func endAll(pgid int, noChildren <-chan struct{}) {
	deadline := time.NewTimer(endTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		for _, child := range childrenOf(os.Getpid()) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
		select {
		case <-noChildren:
			return
		case <-deadline.C:
			fmt.Fprintf(os.Stderr, "trainstep supervise: processes of group %d still run after %s of SIGKILL\n", pgid, endTimeout)
			return
		case <-tick.C:
		}
	}
}

// childrenOf lists the processes whose parent is ppid, from /proc.
func childrenOf(ppid int) []int {
	procs, _ := procfs.List()
	var children []int
	for _, p := range procs {
		if p.PPID == ppid {
			children = append(children, p.PID)
		}
	}
	return children
}

// dieBySignal ends the supervisor by sig with the kernel's default action,
// as the replica ended; the Go runtime's own handlers would otherwise turn
// some signals (SIGSEGV, SIGABRT, SIGQUIT, …) into exit code 2. It returns
// only if that failed.
func dieBySignal(sig syscall.Signal) {
	// No core file of the supervisor: the replica dumped its own, if any.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	runtime.LockOSThread()
	// A zeroed kernel struct sigaction is SIG_DFL with no flags, whatever
	// the architecture's layout; 8 is the kernel's sigset size on all but MIPS.
	// (SIGKILL's action cannot be changed, nor needs to be.)
	var defaultAction [64]byte
	if sig != syscall.SIGKILL {
		if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&defaultAction)), 0, 8, 0, 0); errno != 0 {
			return
		}
	}
	var set unix.Sigset_t
	set.Val[(sig-1)/64] |= 1 << ((uint(sig) - 1) % 64)
	_ = unix.PthreadSigmask(unix.SIG_UNBLOCK, &set, nil)
	_ = unix.Tgkill(os.Getpid(), unix.Gettid(), sig)
	time.Sleep(time.Second) // the signal is delivered on return from the kernel; this is a backstop
}
