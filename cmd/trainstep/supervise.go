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

// localSupervisor is the command that supervises a local replica: this
// very binary, through /proc/self/exe so that a binary replaced or deleted
// during a long run still starts. (Supervisors exist on Linux only, where
// that path does.)
func localSupervisor() []string {
	return []string{"/proc/self/exe", superviseCommandName}
}
