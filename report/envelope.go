package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbench/lockbench/results"
)

// EnvelopesLeft says what an answer without envelopes leaves to them.
const EnvelopesLeft = "This run tried each fault at one size; where each lock breaks against a fault's size is left to " +
	"make bench-envelope (lockbench envelope, about 10 minutes), which lockbench advise --envelopes DIR then measures " +
	"your profile against."

// EnvelopeText writes, per lock and fault family of f's envelopes, where
// lock bugs and late writes started, with the mechanism that explains it.
func EnvelopeText(w io.Writer, f *results.File) error {
	if len(f.Envelopes) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("Envelopes (where each lock breaks against the fault's size):\n")
	for _, e := range f.Envelopes {
		fmt.Fprintf(&b, "  %s, %s (1 %s = %s):\n", e.Backend, e.Family, e.Unit, fmtMS(e.LeaseMS))
		for _, bd := range e.Boundaries {
			fmt.Fprintf(&b, "    %s\n", bd.Describe(e.Unit))
		}
		if e.Edge != nil {
			fmt.Fprintf(&b, "    %s\n", e.Edge.Describe(e.Unit))
		}
		for _, n := range e.Notes {
			fmt.Fprintf(&b, "    note: %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// EnvelopeRegion is the part of an envelope's axis a service lives in:
// its sizes from 0 up to Size (in the family's unit), as its profile
// says (its longest pause over its TTL, its largest clock step over it).
type EnvelopeRegion struct {
	Size  float64
	Label string
}

// ProfileRegion is the region of a family's axis the service of profile
// p lives in; ok false when the profile says nothing of that fault (or of
// its TTL).
func ProfileRegion(p *results.Profile, e results.Envelope) (EnvelopeRegion, bool) {
	if p == nil || p.TTL <= 0 {
		return EnvelopeRegion{}, false
	}
	ttl := time.Duration(p.TTL)
	switch {
	case strings.HasPrefix(e.Family, "client-pause") && p.MaxPause > 0:
		d := time.Duration(p.MaxPause)
		return EnvelopeRegion{Size: float64(d) / float64(ttl), Label: fmt.Sprintf("your pauses (≤ %v, TTL %v)", d, ttl)}, true
	case strings.HasPrefix(e.Family, "clock-jump") && p.ClockStep > 0:
		d := time.Duration(p.ClockStep)
		return EnvelopeRegion{Size: float64(d) / float64(ttl), Label: fmt.Sprintf("your clock steps (≤ %v, TTL %v)", d, ttl)}, true
	}
	return EnvelopeRegion{}, false
}

// EnvelopeMargins says, for each envelope of backend (every backend when
// ""), how far the profile's environment lies from its boundaries: "your
// pauses reach 0.08 leases; redis's first lock bug under client-pause was
// never reached up to 4 leases; its first late write (guard none) at 1.19
// leases, 15× your pauses".
func EnvelopeMargins(f *results.File, p *results.Profile, backend string) []string {
	var out []string
	for _, e := range f.Envelopes {
		if backend != "" && e.Backend != backend {
			continue
		}
		r, ok := ProfileRegion(p, e)
		if !ok {
			continue
		}
		var parts []string
		for _, b := range e.Boundaries {
			what := "first lock bug"
			if b.Event != results.EventLockBug {
				what = "first late write (" + strings.TrimPrefix(b.Event, "late-write:") + ")"
			}
			switch {
			case b.None:
				parts = append(parts, fmt.Sprintf("its %s was never reached up to %g %ss (0 in %d tested, ≤ %.0f%%)",
					what, b.Safe, e.Unit, b.SafeTested, 100*b.SafeUpper95))
			case b.First > 0 && b.SafeTested == 0 && !b.Resolved:
				parts = append(parts, fmt.Sprintf("its %s was seen at %g %ss, no smaller size probed (at or below it)", what, b.First, e.Unit))
			case b.First > 0 && r.Size > 0:
				verdict := fmt.Sprintf("%.1f× your %s", b.First/r.Size, r.what())
				if b.First <= r.Size {
					verdict = "INSIDE your environment"
				}
				parts = append(parts, fmt.Sprintf("its %s was at %g %ss (%s)", what, b.First, e.Unit, verdict))
			case b.First > 0:
				parts = append(parts, fmt.Sprintf("its %s was at %g %ss", what, b.First, e.Unit))
			}
		}
		if len(parts) == 0 {
			why := "no point measured"
			if len(e.Notes) > 0 {
				why = e.Notes[0]
			}
			parts = append(parts, "not measured ("+why+")")
		}
		out = append(out, fmt.Sprintf("%s under %s: %s reach %.3g %ss; %s", e.Backend, e.Family, r.Label, r.Size, e.Unit,
			strings.Join(parts, "; ")))
	}
	return out
}

func (r EnvelopeRegion) what() string {
	if strings.Contains(r.Label, "clock") {
		return "clock steps"
	}
	return "pauses"
}

// WriteEnvelopes writes f's envelopes into dir: envelope.md (a section per
// family: the chart, each lock's boundaries and the mechanism behind
// them) and charts/envelope-<family>.png/.svg; with a profile (p, else
// f.Profile) its environment is shaded and the margins said.
func WriteEnvelopes(dir string, f *results.File, p *results.Profile) error {
	if p == nil {
		p = f.Profile
	}
	if err := os.MkdirAll(filepath.Join(dir, chartDir), 0o755); err != nil {
		return err
	}
	charts, err := envelopeCharts(dir, f, p)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(EnvelopeSection(f, p, charts))
	return os.WriteFile(filepath.Join(dir, "envelope.md"), []byte(b.String()), 0o644)
}

// EnvelopeSection is the report's Markdown section on f's envelopes,
// with the charts given (by family) linked.
func EnvelopeSection(f *results.File, p *results.Profile, charts map[string]*chart) string {
	var b strings.Builder
	b.WriteString("## Safety envelopes: where each lock breaks\n\n")
	b.WriteString("Each point is a probe of a search on the fault's size: its tested injections and how many were followed by a lock bug " +
		"(a grant inside the earlier holder's promised lease) or by a late write a guard let in. " +
		"The boundary is the largest size with none in its tested injections (with the exact 95% bound on the rate there) " +
		"below the smallest size with one; sizes are 2^¼ apart, so a resolved boundary is known " +
		"to within a factor 1.19.\n\n")
	if ms := EnvelopeMargins(f, p, ""); len(ms) > 0 {
		b.WriteString("**Your service against the envelopes:**\n\n")
		for _, m := range ms {
			fmt.Fprintf(&b, "- %s\n", m)
		}
		b.WriteString("\n")
	}
	for _, fam := range envelopeFamilies(f) {
		fmt.Fprintf(&b, "### %s\n\n", fam)
		if ch := charts[fam]; ch != nil {
			fmt.Fprintf(&b, "![%s](%s/%s.png)\n\n%s\n\n", ch.Title, chartDir, ch.Name, ch.Read)
		}
		mech := ""
		b.WriteString("| lock | event | boundary | points (size: events/tested) |\n|---|---|---|---|\n")
		for _, e := range f.Envelopes {
			if e.Family != fam {
				continue
			}
			mech = e.Mechanism
			var pts []string
			for _, pt := range e.Points {
				pts = append(pts, fmt.Sprintf("%g: %d/%d", pt.Size, pt.LockBugs, pt.Tested))
			}
			for _, bd := range e.Boundaries {
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", e.Backend, bd.Event, strings.TrimPrefix(bd.Describe(e.Unit),
					bd.Event+": "), strings.Join(pts, ", "))
			}
			if e.Edge != nil {
				fmt.Fprintf(&b, "| %s | tested | %s | |\n", e.Backend, e.Edge.Describe(e.Unit))
			}
		}
		if mech != "" {
			fmt.Fprintf(&b, "\nMechanism: %s.\n\n", mech)
		}
	}
	return b.String()
}

// envelopeFamilies are f's families in the order they first appear.
func envelopeFamilies(f *results.File) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range f.Envelopes {
		if !seen[e.Family] {
			seen[e.Family] = true
			out = append(out, e.Family)
		}
	}
	return out
}
