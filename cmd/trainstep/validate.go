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
		Use:   "validate [-f] JOB.yaml...",
		Short: "Check job files: print valid, or every error with its field path",
		Long: `Check job files as 'trainstep run' would before creating anything: parse each,
apply the overrides, default and validate it.

Each job is also rendered, as 'trainstep render' would, and every pod held to
the replica policy's PodSecurity level and the job to its rendered size.
A valid job prints "valid" on stdout. An invalid one prints every error with
its field path on stderr, one per line. Several files (-f a.yaml -f b.yaml,
or as arguments) are each checked; then every line names its file. Exit 0
when every file is valid, else 11.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			all, err := f.spec.loadAll(cmd, args)
			if err != nil {
				return err
			}
			paths := make([]string, len(all))
			for i, l := range all {
				paths[i] = l.path
			}
			for i, l := range all {
				if l.err == nil {
					_, _, all[i].err = prepareRender(l, true, "")
					l = all[i]
				}
				if l.err == nil {
					if _, err := fmt.Fprintln(cmd.OutOrStdout(), filePrefix(paths, l.path)+"valid"); err != nil {
						return err
					}
				}
			}
			return joinLoadErrors(all)
		},
	}
	f.spec.register(cmd)
	return cmd
}
