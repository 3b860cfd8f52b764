// Command pause is the sandbox ("pause") container of the test cluster's real node: the first
// process of every pod, holding the pod's namespaces while its containers come and go. It
// does what Kubernetes' own pause does — waits for SIGINT or SIGTERM and, as PID 1 of a pod
// that shares its process namespace, reaps orphaned children — so that the node runs
// without pulling registry.k8s.io/pause. It is built static for a FROM-scratch image.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not running as PID 1")
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "pause: shutting down, got signal %v\n", sig)
			os.Exit(0)
		}
		reapChildren()
	}
}

// reapChildren waits for every child that has exited, without blocking.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
