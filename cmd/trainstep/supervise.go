package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/trainstep/trainstep/pkg/backend/local"
)

// superviseCommandName is the hidden command `run --local` starts each
// replica under.
const superviseCommandName = "__supervise"

// newSuperviseCommand is the supervisor of one local replica: trainstep
// re-executed, never typed by a user. It takes its arguments as they are.
func newSuperviseCommand() *cobra.Command {
	return &cobra.Command{
		Use:                superviseCommandName + " -- PATH ARGV0 [ARG...]",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(local.Supervise(args))
		},
	}
}

// selfExecutable is this very binary, still there if the file was
// replaced or deleted during a long run. Supervisors exist on Linux only,
// where this path does (when /proc is mounted).
const selfExecutable = "/proc/self/exe"

// localSupervisor is the command that supervises a local replica, or nil
// where there is none: then replicas start directly.
func localSupervisor() []string {
	if _, err := os.Stat(selfExecutable); err != nil {
		return nil
	}
	return []string{selfExecutable, superviseCommandName}
}
