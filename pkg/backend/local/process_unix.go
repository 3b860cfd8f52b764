//go:build unix

package local

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// outputDrain bounds how long a process's output is still copied after it
// and its group are gone: a program that moved itself out of the group may
// hold the pipe open forever.
const outputDrain = 2 * time.Second

// process is one running instance of a replica's command. It leads its own
// process group, so stopping it reaches every process it started.
type process struct {
	cmd *exec.Cmd
	// pid is the process's; pgid its group's, the same number.
	pid, pgid int
	// exited is closed once the process is reaped, what it left in its
	// group is killed and its output is copied; exitCode is set by then.
	exited   chan struct{}
	exitCode int32
}

// startProcess starts argv with env in its own process group. Its stdout
// and stderr go to out, which is closed when the process has exited; a nil
// out discards them.
func startProcess(argv, env []string, out io.WriteCloser) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = processAttributes()
	// The pipe is ours rather than os/exec's, so that waiting for the
	// process does not also wait for whoever else holds the pipe.
	var reader, writer *os.File
	if out != nil {
		var err error
		if reader, writer, err = os.Pipe(); err != nil {
			out.Close()
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = writer, writer
	}
	err := cmd.Start()
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
	p := &process{cmd: cmd, pid: cmd.Process.Pid, pgid: cmd.Process.Pid, exited: make(chan struct{})}
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

// reap waits for the process, then ends its group as a container's end
// ends every process in it.
func (p *process) reap(reader *os.File, out io.WriteCloser, copied chan struct{}) {
	err := p.cmd.Wait()
	p.exitCode = exitCodeOf(p.cmd.ProcessState, err)
	signalGroup(p.pgid, syscall.SIGKILL)
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
