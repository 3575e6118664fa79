package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/lockbench/lockbench/stats"
)

// bound is a count of events with the trials they happened in — tested
// injections charged with at least one under a fault, contended grants
// without one — and the exact one-sided 95% upper bound on their rate. It
// is the only form in which the report states a safety number, so that a
// zero never reads as "none" or "safe" without how little or much it
// proves beside it.
type bound struct {
	stats.Rate
	unit string
}

// perInjection is k of the injections of t that enter rates: the tested
// ones ("injections" when the run did not judge them). k must count
// injections charged with an event (tally.Hit), not events: a trial
// fails once however many incidents follow it.
func perInjection(k int64, t tally) bound {
	unit := "tested injection"
	if t.Unjudged {
		unit = "injection"
	}
	return bound{Rate: stats.Rate{K: k, N: t.Injections}, unit: unit}
}

// perGrant is k events over contended grants (group.Contended): grants
// made while another client of the key waited, where a double grant can
// show.
func perGrant(k, grants int64) bound {
	return bound{Rate: stats.Rate{K: k, N: grants}, unit: "contended grant"}
}

// kind is a kind of safety event, as the tables and the answer name it.
type kind int

const (
	kindLockBug kind = iota
	kindAmbiguous
	kindExpired
	kindIncident
	kindStale
)

// words names a kind as the tables do.
func (k kind) words() string {
	return [...]string{"lock-bug incidents", "ambiguous incidents", "expired-holder incidents", "double-grant incidents",
		"stale writes accepted"}[k]
}

// events returns t's events of kind k and the injections charged with one.
func (t tally) events(k kind) (n, hit int64) {
	switch k {
	case kindLockBug:
		return t.lockBugs(), t.Hit.LockBug
	case kindAmbiguous:
		return t.IncidentsAmbiguous, t.Hit.Ambiguous
	case kindExpired:
		return t.IncidentsExpired, t.Hit.Expired
	case kindIncident:
		return t.Incidents, t.Hit.Incident
	}
	return t.StaleAccepted, t.Hit.Stale
}

// rateOf is the bound of kind k in g under a fault class: per contended
// grant without a fault (k events in them), per tested injection under
// one (the injections charged with one).
func rateOf(g group, k kind, class string) bound {
	n, hit := g.events(k)
	if class == faultNone {
		return perGrant(n, g.Contended)
	}
	return perInjection(hit, g.tally)
}

// String words the bound: "0 in 40 injections (rate ≤ 7.2% at 95%)",
// "3 in 40 injections (7.5%; ≤ 18% at 95%)"; without trials "3, in no
// injection: not judged".
func (b bound) String() string {
	if !b.Known() {
		return fmt.Sprintf("%d, in no %s: not judged", b.K, b.unit)
	}
	n := fmtCount(b.N) + " " + b.unit + "s"
	if b.N == 1 {
		n = "1 " + b.unit
	}
	switch {
	case b.K == 0:
		return fmt.Sprintf("0 in %s (rate ≤ %s at 95%%)", n, fmtPct(b.Upper95()))
	case b.K > b.N:
		return fmt.Sprintf("%s in %s (more than one per %s)", fmtCount(b.K), n, b.unit)
	}
	return fmt.Sprintf("%s in %s (%s; ≤ %s at 95%%)", fmtCount(b.K), n, fmtPct(b.Observed()), fmtPct(b.Upper95()))
}

// hadOne words a bound per injection as the trials that had an event:
// "2 in 3 tested injections had one (67%; ≤ 98% at 95%)"; a bound per
// grant counts events and reads as String.
func (b bound) hadOne() string {
	s := b.String()
	if !b.Known() || strings.HasSuffix(b.unit, "grant") {
		return s
	}
	head, tail, _ := strings.Cut(s, " (")
	return head + " had one (" + tail
}

// cell is the bound for a table cell: "0/40 ≤7.2%", "3/40 ≤18%", "—"
// without trials.
func (b bound) cell() string {
	if !b.Known() {
		if b.K > 0 {
			return strconv.FormatInt(b.K, 10) + " (no " + b.unit + ")"
		}
		return "—"
	}
	if b.K > b.N {
		return fmt.Sprintf("%s/%s >1 each", fmtCount(b.K), fmtCount(b.N))
	}
	return fmt.Sprintf("%s/%s ≤%s", fmtCount(b.K), fmtCount(b.N), fmtPct(b.Upper95()))
}

// fmtPct formats a fraction as a percentage with the digits that matter:
// 53%, 7.2%, 0.99%, 0.0024%.
func fmtPct(p float64) string {
	v := p * 100
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v >= 10:
		return fmt.Sprintf("%.0f%%", v)
	case v >= 1:
		return trimZero(fmt.Sprintf("%.1f", v)) + "%"
	case v >= 0.1:
		return trimZero(fmt.Sprintf("%.2f", v)) + "%"
	case v == 0:
		return "0%"
	}
	// Two significant digits, written out: 0.0024%, never 2.4e-03%.
	digits := int(-math.Floor(math.Log10(v))) + 1
	return trimZero(strconv.FormatFloat(v, 'f', digits, 64)) + "%"
}

// fmtCount formats a count of trials: 40, 1,234, 12k.
func fmtCount(n int64) string {
	if n >= 10000 {
		return fmtRate(float64(n))
	}
	s := strconv.FormatInt(n, 10)
	if len(s) > 3 {
		s = s[:len(s)-3] + "," + s[len(s)-3:]
	}
	return s
}
