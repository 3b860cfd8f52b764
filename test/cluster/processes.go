package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// component is one running binary of the cluster, in its own process group so that stopping
// it also stops anything it started, and with its output in <dir>/logs/<name>.log.
type component struct {
	name    string
	pgid    int
	exe     string // the executable the process runs (after nsenter, if any)
	logPath string
	exited  chan struct{} // closed when the process has exited (attached mode only)
	waitErr error
}

// spawner starts processes from one locked OS thread. Attached components carry
// Pdeathsig=SIGKILL, which Linux delivers when the *thread* that forked them ends; forking
// from a thread that never ends makes it fire only when the test binary itself dies (a
// timeout panic, a signal), so no orphaned etcd or kube-apiserver outlives a killed test.
type spawner struct {
	requests chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var attachedSpawner = newSpawner()

func newSpawner() *spawner {
	s := &spawner{requests: make(chan spawnRequest)}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for req := range s.requests {
			req.done <- req.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	s.requests <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// startComponent runs binDir/binary with args. Detached components survive this process
// (for `make cluster-up`); attached ones die with it.
func startComponent(binDir, logDir, name, binary string, detached bool, args ...string) (*component, error) {
	exe := filepath.Join(binDir, binary)
	return startProcess(logDir, name, exe, detached, append([]string{exe}, args...))
}

// startProcess runs argv as component name, whose executable (once argv has exec'd through
// any wrapper such as nsenter) is exe.
func startProcess(logDir, name, exe string, detached bool, argv []string) (*component, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating log file for %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = logDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if detached {
		err = cmd.Start()
	} else {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		err = attachedSpawner.start(cmd)
	}
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &component{name: name, pgid: cmd.Process.Pid, exe: exe, logPath: logPath, exited: make(chan struct{})}
	if detached {
		// Nobody waits for a detached process here; once this process exits, init reaps it.
		_ = cmd.Process.Release()
		return c, nil
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// running reports whether an attached component is still up; detached ones are assumed up.
func (c *component) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// exitError describes how the component ended, with the end of its log.
func (c *component) exitError() error {
	return fmt.Errorf("%s exited (%v); last log lines:\n%s", c.name, c.waitErr, tailFile(c.logPath, 30))
}

// stop sends SIGTERM to the component's process group and SIGKILL after grace.
func (c *component) stop(grace time.Duration) {
	stopProcessGroup(c.pgid, grace, c.exited)
}

// stopProcessGroup ends process group pgid: SIGTERM, then SIGKILL if it is still there after
// grace. exited, when not nil, is closed once the group leader has been reaped.
func stopProcessGroup(pgid int, grace time.Duration, exited <-chan struct{}) {
	if pgid <= 0 {
		return
	}
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil {
		return // already gone
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if exited != nil {
			select {
			case <-exited:
				// The leader is reaped; make sure nothing else in its group lingers.
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if exited != nil {
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
	}
}

// waitFor polls ready every interval until it returns true, ctx ends, or a watched
// component exits (then the error carries its log tail).
func waitFor(ctx context.Context, what string, watched []*component, ready func(context.Context) (bool, error)) error {
	var lastErr error
	for {
		for _, c := range watched {
			if !c.running() {
				return fmt.Errorf("waiting for %s: %w", what, c.exitError())
			}
		}
		ok, err := ready(ctx)
		if ok {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), lastErr)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tailFile returns the last n lines of a file, or a note saying why it cannot.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", filepath.Base(path), err)
	}
	defer f.Close()
	var lines []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		lines = append(lines, scanner.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if err := scanner.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		lines = append(lines, fmt.Sprintf("(reading stopped: %v)", err))
	}
	return strings.Join(lines, "\n")
}
