package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

// adviseEnvelopes reads the envelopes of an earlier lockbench envelope
// run (dir, or its results.json), adds them to file (the advise run's,
// whose Profile shades the charts), writes the envelope report into out
// when out is given, and prints, for the picks first, how far the
// profile's environment lies from each boundary.
func adviseEnvelopes(w io.Writer, dir, out string, file *results.File) error {
	src, err := results.Read(resultsPath(dir))
	if err != nil {
		return fmt.Errorf("--envelopes: %w", err)
	}
	if len(src.Envelopes) == 0 {
		return fmt.Errorf("--envelopes %s: the file holds no envelopes (lockbench envelope writes them)", dir)
	}
	file.Envelopes = src.Envelopes
	var picks []string
	if a := file.Answer; a != nil {
		for _, c := range []*results.Choice{a.Correctness, a.Efficiency} {
			if c != nil {
				picks = append(picks, c.Pick...)
			}
		}
	}
	var backends []string
	for _, e := range src.Envelopes {
		if !slices.Contains(backends, e.Backend) {
			backends = append(backends, e.Backend)
		}
	}
	slices.SortStableFunc(backends, func(a, b string) int {
		pa, pb := slices.Contains(picks, a), slices.Contains(picks, b)
		switch {
		case pa && !pb:
			return -1
		case pb && !pa:
			return 1
		}
		return 0
	})
	fmt.Fprintf(w, "Your service against the envelopes of %s:\n", dir)
	any := false
	for _, b := range backends {
		for _, m := range report.EnvelopeMargins(file, file.Profile, b) {
			mark := ""
			if slices.Contains(picks, b) {
				mark = " (the pick)"
			}
			fmt.Fprintf(w, "  - %s%s\n", m, mark)
			any = true
		}
	}
	if !any {
		fmt.Fprintln(w, "  (the profile gives no pause, clock step or TTL to compare: --max-pause, --clock-step, --ttl)")
	}
	if out == "" {
		return nil
	}
	if err := report.WriteEnvelopes(out, file, file.Profile); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(w, "envelopes: %s\n", filepath.Join(out, "envelope.md"))
	return nil
}
