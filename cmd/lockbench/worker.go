package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/worker"
)

func workerCmd() *cobra.Command {
	var assignment string
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "Run one client of a case (started by lockbench run; reads its assignment on stdin, or from --assignment)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if assignment != "" {
				return worker.MainFile(cmd.Context(), assignment)
			}
			return worker.Main(cmd.Context(), os.Stdin)
		},
	}
	cmd.Flags().StringVar(&assignment, "assignment", "", "read the assignment from this file (a worker on another host) instead of stdin")
	return cmd
}
