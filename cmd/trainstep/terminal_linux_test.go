package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/trainstep/trainstep/internal/testutil"
)

// openPTY opens a pseudo-terminal pair: what is written to tty is read
// from ptmx.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		testutil.PrerequisiteMissing(t, "needs a pseudo-terminal (/dev/ptmx) to run trainstep on a terminal: %v", err)
	}
	var unlock int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Fatalf("unlocking the pty: %v", errno)
	}
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatalf("naming the pty: %v", errno)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptmx, tty
}

// On a terminal trainstep logs for a person (console lines, no source
// file:line); through a pipe, JSON lines.
func TestLogFormatFollowsTheTerminal(t *testing.T) {
	bin := trainstepBinary(t)
	dir := t.TempDir()
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte(localJob("tty", "true")), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--local", "-f", job, "--outputs-dir", filepath.Join(dir, "outputs")}

	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = tty
	if err := cmd.Run(); err != nil {
		t.Fatalf("run on a terminal: %v", err)
	}
	tty.Close()
	var onTerminal bytes.Buffer
	_, _ = io.Copy(&onTerminal, ptmx) // ends with EIO once the terminal is closed
	text := onTerminal.String()
	if !strings.Contains(text, "INFO") || !strings.Contains(text, "job started") || strings.Contains(text, `{"level"`) || strings.Contains(text, ".go:") {
		t.Errorf("on a terminal, want console lines without source locations, got:\n%s", text)
	}

	var piped bytes.Buffer
	cmd = exec.Command(bin, args...)
	cmd.Stderr = &piped
	if err := cmd.Run(); err != nil {
		t.Fatalf("run through a pipe: %v", err)
	}
	if first, _, _ := strings.Cut(piped.String(), "\n"); !strings.HasPrefix(first, `{"level":"`) {
		t.Errorf("through a pipe, want JSON lines, got:\n%s", piped.String())
	}
}
