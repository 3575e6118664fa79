package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpExamples parses every example of run --help and advise --help
// with a fresh command's flags and argument rule, as the CLI does before
// running it: an example that names a flag the command lacks, gives one
// a value it cannot parse, or passes arguments the command refuses,
// fails; so does a command without examples.
func TestHelpExamples(t *testing.T) {
	command := func(name string) *cobra.Command {
		for _, c := range rootCmd().Commands() {
			if c.Name() == name {
				return c
			}
		}
		t.Fatalf("no command %s", name)
		return nil
	}
	for _, name := range []string{"run", "advise"} {
		t.Run(name, func(t *testing.T) {
			n := 0
			for _, line := range strings.Split(command(name).Example, "\n") {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				args := strings.Fields(line)
				if len(args) < 2 || args[0] != "lockbench" || args[1] != name {
					t.Errorf("example %q does not run lockbench %s", line, name)
					continue
				}
				n++
				cmd := command(name)
				if err := cmd.ParseFlags(args[2:]); err != nil {
					t.Errorf("example %q: %v", line, err)
					continue
				}
				if cmd.Args != nil {
					if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
						t.Errorf("example %q: %v", line, err)
					}
				}
			}
			if n == 0 {
				t.Errorf("lockbench %s --help has no examples", name)
			}
		})
	}
}
