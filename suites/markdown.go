package suites

import (
	"fmt"
	"io"
	"strings"

	"github.com/lockbench/lockbench/backends"
)

// WriteMarkdown writes rules to w as a Markdown table, one row a rule, in
// order: docs/suites.md is Table written so (go test ./suites -update
// rewrites it), so that the documentation reads the runner's table.
func WriteMarkdown(w io.Writer, rules []Rule) error {
	var b strings.Builder
	b.WriteString("| suites | backends | faults | profiles (fast unless a row says) | left out |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, r := range rules {
		in := r.In.String()
		if in == "" {
			in = "(this one)"
		}
		profiles := ""
		if r.Backends.zero() {
			profiles = strings.Join(r.Profiles, ", ")
		}
		faults := code(r.Faults)
		if len(r.Faults) == 0 {
			faults = "every fault"
		}
		leave := ""
		if r.Leave != "" {
			leave = "left out " + r.Leave
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", in, r.Backends.markdown(), faults, profiles, leave)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// markdown says which backends b selects, for WriteMarkdown.
func (b Backends) markdown() string {
	var parts []string
	if b.Every {
		parts = append(parts, "every backend")
	}
	if len(b.Specs) > 0 {
		parts = append(parts, code(b.Specs))
	}
	if len(b.Kinds) > 0 {
		kinds := make([]string, len(b.Kinds))
		for i, k := range b.Kinds {
			kinds[i] = string(k)
			if k == backends.NoServers {
				kinds[i] = "no servers"
			}
		}
		parts = append(parts, "every backend on "+strings.Join(kinds, ", ")+" servers")
	}
	if len(parts) == 0 {
		return "(wherever they run)"
	}
	return strings.Join(parts, "; ")
}

// code writes each of names as Markdown code, comma-separated.
func code(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + n + "`"
	}
	return strings.Join(out, ", ")
}
