package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/bench"
)

func workerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "worker",
		Short:  "Run one client of a case (started by lockbench run; reads its assignment on stdin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.Worker(cmd.Context(), os.Stdin)
		},
	}
}
