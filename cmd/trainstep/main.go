// Command trainstep runs one distributed training job (TensorFlow, PyTorch,
// MPI, JAX or XGBoost) as an Argo Workflows step, without a training
// operator: `trainstep run` creates and tends the replicas, `render` prints
// the objects a job would create, `validate` checks job files, `convert`
// prints the TrainJob a Kubeflow manifest runs as; `cleanup` deletes what a
// workflow's steps left running (the templates' exit handler);
// `completion` prints shell completion scripts.
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

	"github.com/trainstep/trainstep/executor"
	"github.com/trainstep/trainstep/pkg/outputs"
	"github.com/trainstep/trainstep/pkg/result"
)

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
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.SetVersionTemplate(versionLine() + "\n")
	root.AddCommand(
		newRunCommand(), // run.go
		newRenderCommand(),
		newValidateCommand(),
		newConvertCommand(),
		newCleanupCommand(),
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
		err = result.Invalid(result.ReasonInvalidArguments, err)
		defer fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		if cmd.Name() == "run" && cmd.HasParent() {
			reportRunUsageError(args, err, stdout)
		}
	}
	printError(stderr, err)
	return result.PhaseOf(err).ExitCode()
}

// printError writes err to stderr. An error of several lines (every field
// error of an invalid job) gets one indented line each, kept whole so each
// can be searched for.
func printError(stderr io.Writer, err error) {
	label := "Error:"
	if result.PhaseOf(err) == result.PhaseTerminated {
		label = "Stopped:" // asked for, not an error
	}
	lines := strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
	if len(lines) == 1 {
		fmt.Fprintln(stderr, label, lines[0])
		return
	}
	fmt.Fprintln(stderr, label)
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

// reportRunUsageError writes the outputs of a `trainstep run` whose command
// line cobra rejected (an unknown flag, a flag value that does not parse):
// the step still ends with its outputs. The outputs directory is read from
// the arguments as they are; when --outputs-dir has no value there is no
// directory to write to, and only the result line is printed.
func reportRunUsageError(args []string, err error, stdout io.Writer) {
	cfg := executor.Config{Stdout: stdout}
	dir, known := outputsDirFromArgs(args)
	if !known {
		res := result.Result{Phase: result.PhaseInvalid, Reason: result.ReasonInvalidArguments, Message: err.Error()}
		_ = outputs.PrintResult(stdout, res)
		return
	}
	cfg.OutputsDir = dir
	executor.Report(cfg, err)
}

// outputsDirFromArgs finds --outputs-dir in a command line that may not
// parse: the last value given, else the default; known is false when the
// flag is given without a value.
func outputsDirFromArgs(args []string) (dir string, known bool) {
	dir, known = executor.DefaultOutputsDir, true
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return dir, known
		case strings.HasPrefix(a, "--outputs-dir="):
			dir, known = strings.TrimPrefix(a, "--outputs-dir="), true
		case a == "--outputs-dir":
			if i+1 >= len(args) {
				return "", false
			}
			i++
			dir, known = args[i], true
		}
	}
	if dir == "" {
		return "", false
	}
	return dir, known
}
