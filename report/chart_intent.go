package report

import (
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot/vg"
)

// cellExpired colours a cell whose holders outlived their leases and
// went on writing where nothing checked them: the lease working as a
// lease does, which fencing is for. It is no violation colour, so that a
// lock that kept its promise is not painted like one that broke it.
var cellExpired = color.RGBA{214, 206, 240, 255}

// The intents of the answer, each with a safety figure of its own.
const (
	intentEfficiency  = "efficiency"
	intentCorrectness = "correctness"
)

// intentGuard is the guard the safety figure of intent judges under:
// none for efficiency (a rare double grant is tolerable, and nothing
// checks the writes), and with fencing for correctness (the strongest
// token check each case ran, as the rules read it).
func intentGuard(intent string) string {
	if intent == intentCorrectness {
		return guardFenced
	}
	return guardNone
}

// intentCell returns the cell of one fault × backend in the safety
// figure of intent: lock bugs always count against the lock; for
// correctness so do the late writes the fenced resource accepted, the
// updates they lost and tokens that went back; for efficiency those are
// an expired holder's doing, shown apart.
func (ds *dataset) intentCell(backend, fault, intent string) gridCell {
	gs := ds.find(query{Backend: backend, Fault: fault, Guard: intentGuard(intent)})
	if len(gs) == 0 {
		return gridCell{fill: cellAbsent, lines: []cellLine{{text: "not judged"}}, dim: true}
	}
	t := totals(gs)
	rate := func(k kind) string { return rateOf(t, k, gs[0].FaultClass).cell() }
	late := t.StaleAccepted + t.LostUpdates + t.TokenRegressions
	lines := []cellLine{
		{"bug " + rate(kindLockBug), t.lockBugs() > 0},
		{"exp " + rate(kindExpired), false},
	}
	if intent == intentCorrectness {
		lines = append(lines, cellLine{fmt.Sprintf("late %d acc %d rej", t.StaleAccepted, t.StaleRejected), t.StaleAccepted > 0})
		if t.LostUpdates > 0 {
			lines = append(lines, cellLine{fmt.Sprintf("lost upd %d", t.LostUpdates), true})
		}
	} else if t.StaleAccepted > 0 {
		lines = append(lines, cellLine{fmt.Sprintf("late %d unfenced", t.StaleAccepted), false})
	}
	if t.TokenRegressions > 0 {
		lines = append(lines, cellLine{fmt.Sprintf("token regr %d", t.TokenRegressions), intent == intentCorrectness})
	}
	if strings.Contains(t.Durability, ",") {
		lines = append(lines, cellLine{"pooled profiles", false})
	}
	if intent == intentCorrectness && t.Unfenced && !t.Fencing {
		lines = append(lines, cellLine{"no tokens", false})
	}
	fill := cellClean
	switch {
	case t.lockBugs() > 0:
		fill = cellLockBug
	case intent == intentCorrectness && late > 0:
		fill = cellViolation
	case intent == intentCorrectness && t.Unfenced && !t.Fencing:
		fill = cellNoTokens
	case intent == intentEfficiency && (t.IncidentsExpired > 0 || t.StaleAccepted > 0):
		fill = cellExpired
	case t.IncidentsExpired > 0:
		fill = cellCaught
	}
	return gridCell{fill: fill, lines: lines}
}

// intentSafetyChart draws the safety figure of one intent: a single grid
// of faults (rows) by backends (columns), judged under the guard the
// intent needs, small enough for a screen. Expired holders — the lease
// working — are drawn apart from lock bugs, in a colour of their own.
func (ds *dataset) intentSafetyChart(intent string) (*chart, error) {
	guard := intentGuard(intent)
	var rows []string
	for _, f := range ds.Faults {
		if len(ds.find(query{Fault: f, Guard: guard})) > 0 {
			rows = append(rows, f)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	ch := &chart{Name: "safety-" + intent}
	lg := newLegend()
	lg.add("lock-bug incident", swatch{fill: cellLockBug})
	if intent == intentCorrectness {
		ch.Title = "For correctness: lock bugs, and late writes the fenced resource accepted"
		ch.Read = "Each cell (a fault, a backend) under fencing — the strongest token check its cases ran (fence-rw where " +
			"it ran, else fence). " +
			"\"bug k/n ≤u\": k of the n tested injections were followed by a lock bug — the key granted before the earlier grant's " +
			"contract line — with the 95% upper bound u " +
			"(without a fault, k in n contended grants); \"exp\": the same for expired holders, who outlived their lease; \"late\": " +
			"their writes the resource accepted and rejected. " +
			"A pooled cell names its profiles in the safety table. Dark red: a lock bug; light red: a late write got through, or an " +
			"update was lost; yellow: the backend issues no tokens to check; " +
			"blue: holders outlived their leases and every late write was rejected — fencing doing its job; green: nothing; grey: not judged."
		lg.add("late write accepted", swatch{fill: cellViolation})
		lg.add("no tokens to check", swatch{fill: cellNoTokens})
		lg.add("expired, all rejected", swatch{fill: cellCaught})
	} else {
		ch.Title = "For efficiency: lock bugs per fault × backend, no fencing"
		ch.Read = "Each cell (a fault, a backend) without fencing (guard none). \"bug k/n ≤u\": k of the n tested injections were" +
			" followed by a lock bug — " +
			"the key granted before the earlier grant's contract line — with the 95% upper bound u (without a fault, k in n contended grants). " +
			"Dark red: a lock bug. Lavender: expired holders — a holder outlived its lease and wrote late, which no lease prevents " +
			"and fencing is for; " +
			"\"exp\" counts them, \"late … unfenced\" the writes an unfenced resource took from them: reported, not ranked. " +
			"Green: nothing; grey: " +
			"not judged."
		lg.add("expired holders", swatch{fill: cellExpired})
	}
	lg.add("nothing counted", swatch{fill: cellClean})
	lg.add("not judged", swatch{fill: cellAbsent})
	lg.add("")
	lg.add("k/n ≤u: k of n tested")
	lg.add("injections, rate ≤ u")
	lg.add("at 95%")
	pn := gridPanel{title: guardTitleOf(guard), rows: rows}
	for _, f := range rows {
		var row []gridCell
		for _, b := range ds.Backends {
			row = append(row, ds.intentCell(b, f, intent))
		}
		pn.cells = append(pn.cells, row)
	}
	return gridChartW(ch, ds.Backends, []gridPanel{pn}, lg, "fault", 1.05*vg.Inch, 1.9*vg.Inch)
}

// guardTitleOf titles the panel of a safety figure judged under guard,
// the rules' "with fencing" included.
func guardTitleOf(guard string) string {
	if guard == guardFenced {
		return "with fencing: the resource checks tokens (on reads and writes where the case ran fence-rw)"
	}
	return guardTitle(guard)
}
