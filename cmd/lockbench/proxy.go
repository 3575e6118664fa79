package main

import (
	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/compose"
)

// proxyCmd is `lockbench proxy`: the proxy beside a server on a host of a
// run over an inventory (compose.PlacedProxy), started there by the run
// with a pidfile. Its flags are compose.ProxyMain's.
func proxyCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "proxy --listen ADDR:PORT --upstream ADDR:PORT --api 127.0.0.1:PORT --api-file FILE [--name NAME]",
		Short:              "Run a Toxiproxy proxy in front of a server on its host (started by lockbench run --inventory)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return compose.ProxyMain(cmd.Context(), args)
		},
	}
}
