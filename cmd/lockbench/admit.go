package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockbench/lockbench/backends"
)

// admitCmds returns, for every backend whose descriptor offers an admit
// command, `lockbench NAME COMMAND --addrs ...` (Redlock: `lockbench
// redlock bootstrap`): what the runner does once on servers it creates,
// for an operator's servers.
func admitCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, d := range backends.Descriptors() {
		if d.AdmitCommand.Name == "" || d.AdmitCommand.Run == nil {
			continue
		}
		parent := &cobra.Command{
			Use:   d.Name,
			Short: "Operate the servers of " + d.Name + ": " + d.AdmitCommand.Short,
			Args:  cobra.NoArgs,
		}
		parent.AddCommand(admitCmd(d))
		cmds = append(cmds, parent)
	}
	return cmds
}

// admitCmd is one backend's admit command.
func admitCmd(d backends.Descriptor) *cobra.Command {
	c := d.AdmitCommand
	var (
		addrs          []string
		user, password string
		tlsf           tlsFlags
		force          bool
		timeout        time.Duration
	)
	params := map[string]*string{}
	cmd := &cobra.Command{
		Use:     c.Name + " --addrs HOST:PORT,...",
		Short:   c.Short,
		Long:    c.Long,
		Example: c.Example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(addrs) == 0 {
				return fmt.Errorf("%s %s: --addrs is required (host:port of each server)", d.Name, c.Name)
			}
			files, tlsConfig, err := tlsf.files()
			if err != nil {
				return fmt.Errorf("%s %s: TLS: %w", d.Name, c.Name, err)
			}
			cfg := backends.Config{Addrs: addrs, Username: user, Password: password, TLS: tlsConfig, TLSFiles: files, Params: map[string]string{}}
			for k, v := range params {
				if *v != "" {
					cfg.Params[k] = *v
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := c.Run(ctx, cfg, force, cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("%s %s: %w", d.Name, c.Name, err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&addrs, "addrs", nil, "the servers (host:port, comma-separated)")
	fl.StringVar(&user, "username", "", "ACL user")
	fl.StringVar(&password, "password", os.Getenv("LOCKBENCH_REDIS_PASSWORD"), "password (default $LOCKBENCH_REDIS_PASSWORD)")
	fl.StringVar(&tlsf.ca, "tls-ca", "", "CA certificate (PEM) to verify the servers; turns TLS on")
	fl.StringVar(&tlsf.cert, "tls-cert", "", "client certificate (PEM); turns TLS on")
	fl.StringVar(&tlsf.key, "tls-key", "", "client key (PEM)")
	fl.BoolVar(&tlsf.insecure, "tls-insecure", false, "use TLS without verifying the servers")
	fl.BoolVar(&force, "force", false, "the servers are new: you have just created them (see above for what it admits then, and the risk)")
	fl.DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	for name, usage := range c.Params {
		params[name] = fl.String(name, "", usage)
	}
	return cmd
}
