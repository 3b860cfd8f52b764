package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

type validateFlags struct {
	spec specFlags
}

func newValidateCommand() *cobra.Command {
	f := &validateFlags{}
	cmd := &cobra.Command{
		Use:   "validate -f JOB.yaml",
		Short: "Check a job file: print valid, or every error with its field path",
		Long: `Check a job file as 'trainstep run' would before creating anything: parse it,
apply the overrides, default and validate it.

A valid job prints "valid" on stdout and exits 0. An invalid one prints every
error with its field path on stderr, one per line, and exits 11.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := f.spec.load(cmd); err != nil {
				return err
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "valid")
			return err
		},
	}
	f.spec.register(cmd)
	return cmd
}
