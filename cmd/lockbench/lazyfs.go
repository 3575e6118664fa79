package main

import (
	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/compose"
)

// lazyfsCmd is the lazy filesystem of a server placed on a host, run
// there by the control node (see compose.LazyFSMain for its usage).
func lazyfsCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "lazyfs",
		Short:              "Serve a power-loss filesystem under a server's dir on this host, or drive one (ctl); started by lockbench run",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return compose.LazyFSMain(cmd.Context(), args, cmd.OutOrStdout())
		},
	}
}
