package report

import (
	"fmt"
	"image/color"
	"slices"
	"strings"
)

// Cell colours of the safety grid.
var (
	cellLockBug   = color.RGBA{230, 120, 100, 255}
	cellViolation = color.RGBA{248, 196, 182, 255}
	cellClean     = color.RGBA{198, 233, 212, 255}
	cellAbsent    = color.RGBA{238, 238, 238, 255}
	cellNoTokens  = color.RGBA{255, 232, 160, 255}
	cellCaught    = color.RGBA{190, 214, 240, 255}
)

// guardTitle explains a guard mode in a panel title.
func guardTitle(guard string) string {
	switch guard {
	case guardNone:
		return "guard none: no fencing"
	case guardFence:
		return "guard fence: the resource checks fencing tokens on writes"
	case "fence-rw":
		return "guard fence-rw: the resource checks tokens on reads and writes"
	case "cas":
		return "guard cas: the resource marks the key at first access, writes only if the mark is still ours"
	}
	return "guard " + guard
}

// safetyCell returns the grid cell of one fault × backend × guard: the
// incidents by class and the stale writes, with their bounds.
func (ds *dataset) safetyCell(backend, fault, guard string) gridCell {
	gs := ds.find(query{Backend: backend, Fault: fault, Guard: guard})
	if len(gs) == 0 {
		return gridCell{fill: cellAbsent, lines: []cellLine{{text: "not judged"}}, dim: true}
	}
	t := totals(gs)
	rate := func(k kind) string { return rateOf(t, k, gs[0].FaultClass).cell() }
	lines := []cellLine{
		{"bug " + rate(kindLockBug), t.lockBugs() > 0},
		{"exp " + rate(kindExpired), false},
		{fmt.Sprintf("stale %d acc, %d rej", t.StaleAccepted, t.StaleRejected), t.StaleAccepted > 0},
	}
	if t.IncidentsAmbiguous > 0 {
		lines = append(lines, cellLine{"amb " + rate(kindAmbiguous), false})
	}
	if t.LostUpdates > 0 {
		lines = append(lines, cellLine{fmt.Sprintf("lost upd %d", t.LostUpdates), true})
	}
	if t.TokenRegressions > 0 {
		lines = append(lines, cellLine{fmt.Sprintf("token regr %d", t.TokenRegressions), true})
	}
	if strings.Contains(t.Durability, ",") {
		lines = append(lines, cellLine{"profiles " + t.Durability, false})
	}
	fill := cellClean
	switch {
	case t.lockBugs() > 0:
		fill = cellLockBug
	case t.violations() > 0:
		fill = cellViolation
	case t.Unfenced && !t.Fencing:
		fill = cellNoTokens
		lines = append(lines, cellLine{"no tokens issued", false})
	case t.IncidentsExpired > 0:
		fill = cellCaught
	}
	return gridCell{fill: fill, lines: lines}
}

// safetyChart draws, for each guard mode, a grid of faults (rows) by
// backends (columns) whose cells hold the lock-bug and expired-holder
// incidents per injection with their 95% bounds, and the stale writes
// accepted and rejected, over every workload, client count, profile and
// trial. A combination not run is grey and says "not judged", never a
// reassuring zero.
func (ds *dataset) safetyChart() (*chart, error) {
	if len(ds.Groups) == 0 {
		return nil, nil
	}
	ch := &chart{
		Name:  "safety",
		Title: "Safety per fault × backend: tested injections with an incident, with their 95% upper bounds",
		Read: "One panel per resource guard. In each cell (a fault, a backend), \"bug k/n ≤u\" says that k of the n tested injections were " +
			"followed by a lock-bug incident — the key granted before the earlier grant's contract line — " +
			"with the 95% upper bound u on that rate (without a fault, k incidents in n contended grants); \"exp\" the same for expired-holder " +
			"incidents, what fencing is for, and \"amb\" for ambiguous ones, inside the clock bounds of the line; " +
			"\"stale\" the stale writes the resource accepted and rejected. Dark red: a lock bug; light red: another violation; blue: holders " +
			"outlived their lease but nothing stale got through; " +
			"green: nothing; yellow: fenced, but the backend issues no tokens; grey: not judged (see the coverage table for why). A cell that " +
			"pools durability profiles names them; the safety table splits them.",
	}
	var panels []gridPanel
	for _, guard := range ds.Guards {
		pn := gridPanel{title: guardTitle(guard)}
		for _, f := range ds.Faults {
			if len(ds.find(query{Fault: f, Guard: guard})) > 0 {
				pn.rows = append(pn.rows, f)
			}
		}
		for _, f := range pn.rows {
			var row []gridCell
			for _, b := range ds.Backends {
				row = append(row, ds.safetyCell(b, f, guard))
			}
			pn.cells = append(pn.cells, row)
		}
		panels = append(panels, pn)
	}
	lg := newLegend()
	lg.add("lock-bug incident", swatch{fill: cellLockBug})
	lg.add("other violation", swatch{fill: cellViolation})
	lg.add("expired holders, nothing", swatch{fill: cellCaught})
	lg.add("   stale got through")
	lg.add("nothing counted", swatch{fill: cellClean})
	lg.add("fenced, no tokens to check", swatch{fill: cellNoTokens})
	lg.add("not judged", swatch{fill: cellAbsent})
	lg.add("")
	lg.add("bug: lock-bug incidents")
	lg.add("exp: expired-holder incidents")
	lg.add("amb: ambiguous incidents")
	lg.add("k/n ≤u: k of n tested injections,")
	lg.add("   rate ≤ u at 95%")
	lg.add("stale acc/rej: stale writes")
	lg.add("   accepted / rejected")
	lg.add("bold: a violation count")
	for _, guard := range ds.Guards {
		for _, b := range ds.Backends {
			var faults []string
			for _, f := range ds.Faults {
				if t := totals(ds.find(query{Backend: b, Fault: f, Guard: guard})); t.Unfenced && !t.Fencing {
					faults = append(faults, f)
				}
			}
			if len(faults) > 0 {
				ch.Notes = append(ch.Notes, fmt.Sprintf("%s: guard %s ran under %s, but the backend issued no tokens for the resource to "+
					"check.", b, guard, joinAnd(faults)))
			}
		}
	}
	return gridChart(ch, ds.Backends, panels, lg, "fault")
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
