// Command trainstep runs one distributed training job (TensorFlow, PyTorch,
// MPI, JAX or XGBoost) as an Argo Workflows step, without a training
// operator: `trainstep run` creates and tends the replicas, `render` prints
// the objects a job would create, `validate` checks a job file.
//
// This package only wires commands: it reads flags, the environment and
// files, and hands plain values to the packages that do the work. Exit
// codes follow pkg/result: 0 Succeeded, 10 Failed, 11 Invalid (bad spec or
// flags), 12 Transient, 13 Terminated.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainstep/trainstep/pkg/result"
)

// reasonInvalidArguments is the reason of a command line cobra rejects.
const reasonInvalidArguments = "InvalidArguments"

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// newRootCommand wires every subcommand.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "trainstep",
		Short: "Run one distributed training job as an Argo Workflows step, without a training operator",
		Long: `trainstep runs one distributed training job (TensorFlow, PyTorch, MPI, JAX or
XGBoost) from a TrainJob or Kubeflow manifest: it creates the replica Pods and
headless Services itself, keeps them healthy until the job ends, cleans up and
reports the result.

Exit codes: 0 Succeeded, 10 Failed, 11 Invalid (bad spec or flags, nothing
created), 12 Transient (worth a retry), 13 Terminated by SIGTERM/SIGINT.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.AddCommand(
		newRunCommand(), // run.go
		newRenderCommand(),
		newValidateCommand(),
		newVersionCommand(),
	)
	root.AddCommand(newSuperviseCommand()) // hidden: runs one local replica
	return root
}

// execute runs the command line args and returns the process exit code. An
// error is printed to stderr; one cobra raises before a command starts
// (unknown command or flag, missing required flag) is a usage error and
// exits Invalid.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	started := false
	markStart(root, &started)

	cmd, err := root.ExecuteC()
	if err == nil {
		return result.ExitSucceeded
	}
	if !started {
		err = result.Invalid(reasonInvalidArguments, err)
		defer fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	printError(stderr, err)
	return result.PhaseOf(err).ExitCode()
}

// printError writes err to stderr. An error of several lines (every field
// error of an invalid job) gets one indented line each, kept whole so each
// can be searched for.
func printError(stderr io.Writer, err error) {
	lines := strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
	if len(lines) == 1 {
		fmt.Fprintln(stderr, "Error:", lines[0])
		return
	}
	fmt.Fprintln(stderr, "Error:")
	for _, line := range lines {
		fmt.Fprintln(stderr, "  "+line)
	}
}

// markStart makes every command of the tree set *started when its own code
// begins, so execute can tell usage errors from the command's errors.
func markStart(cmd *cobra.Command, started *bool) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			*started = true
			return run(c, args)
		}
	}
	if run := cmd.Run; run != nil {
		cmd.Run = func(c *cobra.Command, args []string) {
			*started = true
			run(c, args)
		}
	}
	for _, sub := range cmd.Commands() {
		markStart(sub, started)
	}
}
