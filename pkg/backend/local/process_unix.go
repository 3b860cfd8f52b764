//go:build unix

package local

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/trainstep/trainstep/internal/procfs"
)

// outputDrain bounds how long a process's output is still copied after it
// and its group are gone: a program that moved itself out of the group may
// hold the pipe open forever.
const outputDrain = 2 * time.Second

// process is one running instance of a replica's command. It leads its own
// process group, so stopping it reaches every process it started.
type process struct {
	// cmd is the command trainstep started: the replica's, or its
	// supervisor's when the replica runs under one.
	cmd *exec.Cmd
	// pid is the replica's process; pgid its group's, the same number.
	pid, pgid int
	// supervisor is the supervisor's pid, 0 without one; lifeline the
	// pipe end whose closing tells the supervisor that trainstep is gone.
	supervisor int
	lifeline   *os.File
	// exited is closed once the process is reaped, what it left in its
	// group is killed and its output is copied; exitCode is set by then.
	exited   chan struct{}
	exitCode int32
}

// startProcess starts argv with env in its own process group, under the
// supervisor command when one is given and this system supports it (see
// Supervise). Its stdout and stderr go to out, which is closed when the
// process has exited; a nil out discards them.
func startProcess(argv, env []string, out io.WriteCloser, supervisor []string) (*process, error) {
	// The pipe is ours rather than os/exec's, so that waiting for the
	// process does not also wait for whoever else holds the pipe.
	var reader, writer *os.File
	if out != nil {
		var err error
		if reader, writer, err = os.Pipe(); err != nil {
			out.Close()
			return nil, err
		}
	}
	var p *process
	var err error
	if len(supervisor) > 0 && canSupervise {
		p, err = startSupervised(supervisor, argv, env, writer)
	} else {
		p, err = startDirectly(argv, env, writer)
	}
	if writer != nil {
		writer.Close()
	}
	if err != nil {
		if reader != nil {
			reader.Close()
			out.Close()
		}
		return nil, err
	}
	liveGroups.add(p.pgid)
	copied := make(chan struct{})
	if reader == nil {
		close(copied)
	} else {
		go func() {
			_, _ = io.Copy(out, reader)
			close(copied)
		}()
	}
	go p.reap(reader, out, copied)
	return p, nil
}

// startDirectly starts argv as trainstep's own child, leading a new
// process group; output, when not nil, receives its stdout and stderr.
func startDirectly(argv, env []string, output *os.File) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = processAttributes()
	if output != nil {
		cmd.Stdout, cmd.Stderr = output, output
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &process{cmd: cmd, pid: cmd.Process.Pid, pgid: cmd.Process.Pid, exited: make(chan struct{})}, nil
}

// reap waits for the process, then ends its group as a container's end
// ends every process in it.
func (p *process) reap(reader *os.File, out io.WriteCloser, copied chan struct{}) {
	err := p.cmd.Wait()
	p.exitCode = exitCodeOf(p.cmd.ProcessState, err)
	signalGroup(p.pgid, syscall.SIGKILL)
	waitGroupEnded(p.pgid, groupEndTimeout)
	liveGroups.remove(p.pgid)
	if p.lifeline != nil {
		p.lifeline.Close()
	}
	if reader != nil {
		timer := time.NewTimer(outputDrain)
		select {
		case <-copied:
		case <-timer.C:
		}
		timer.Stop()
		reader.Close()
		<-copied
		out.Close()
	}
	close(p.exited)
}

// stop asks the process group to end with SIGTERM and kills it with
// SIGKILL after grace, as a kubelet stops a container. It returns once
// the process has exited.
func (p *process) stop(grace time.Duration) {
	signalGroup(p.pgid, syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.exited:
		return
	case <-timer.C:
	}
	signalGroup(p.pgid, syscall.SIGKILL)
	<-p.exited
}

// liveGroups are the process groups started and not yet ended, for
// KillProcessGroups: an exit that cannot wait for Run to stop them runs no
// deferred cleanup.
var liveGroups = groupSet{pgids: map[int]bool{}}

type groupSet struct {
	sync.Mutex
	pgids map[int]bool
}

func (g *groupSet) add(pgid int) {
	g.Lock()
	defer g.Unlock()
	g.pgids[pgid] = true
}

func (g *groupSet) remove(pgid int) {
	g.Lock()
	defer g.Unlock()
	delete(g.pgids, pgid)
}

// KillProcessGroups kills, with SIGKILL, every process group the local
// backend started that has not ended yet. It is for an exit that cannot
// wait for Run to stop them, such as a second Ctrl-C: after os.Exit no
// deferred cleanup runs, and the kernel's parent-death signal reaches only
// trainstep's own children, not what they started.
func KillProcessGroups() {
	liveGroups.Lock()
	defer liveGroups.Unlock()
	for pgid := range liveGroups.pgids {
		signalGroup(pgid, syscall.SIGKILL)
	}
}

// groupEndTimeout bounds the wait for a killed group's processes to end.
const groupEndTimeout = 2 * time.Second

// waitGroupEnded waits until no process of the group is alive, at most
// limit. A SIGKILL is sent, not yet done: a process killed with its
// supervisor (a stop's SIGKILL) can still run for a moment after the
// supervisor was reaped, and the replica is over only once it has ended.
func waitGroupEnded(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for len(procfs.LiveInGroup(pgid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// signalGroup sends sig to every process of the group; a group that is
// already gone is not an error.
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
}

// exitCodeOf reports an exit as a container runtime does: the exit status,
// or 128 + the signal number for a process killed by a signal (137 for
// SIGKILL).
func exitCodeOf(state *os.ProcessState, waitErr error) int32 {
	if state == nil {
		return exitCodeStartError
	}
	if status, ok := state.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		return 128 + int32(status.Signal())
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return exitCodeStartError
	}
	return int32(state.ExitCode())
}
