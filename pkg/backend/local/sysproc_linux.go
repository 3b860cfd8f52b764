package local

import "syscall"

// processAttributes puts a process in its own group and has the kernel
// kill it if trainstep itself dies without stopping it (SIGKILL, a second
// Ctrl-C).
func processAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
