//go:build unix && !linux

package local

import "syscall"

// processAttributes puts a process in its own group.
func processAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
