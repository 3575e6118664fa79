package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot/vg"

	"github.com/lockbench/lockbench/stats"
)

// shareColor shades a cell from red (no grants inside the fault
// windows) through yellow to green (as many as before the fault).
func shareColor(share float64) color.Color {
	s := math.Min(math.Max(share, 0), 1)
	lerp := func(a, b uint8, t float64) uint8 { return uint8(float64(a) + (float64(b)-float64(a))*t) }
	red, yellow, green := [3]uint8{244, 170, 150}, [3]uint8{250, 230, 150}, [3]uint8{180, 225, 195}
	from, to, t := red, yellow, s*2
	if s > 0.5 {
		from, to, t = yellow, green, (s-0.5)*2
	}
	return color.RGBA{lerp(from[0], to[0], t), lerp(from[1], to[1], t), lerp(from[2], to[2], t), 255}
}

var cellNoData = color.RGBA{225, 225, 232, 255}

// availabilityChart draws a grid of fault classes (rows) by backends
// (columns): in each cell the grants inside the fault windows as a share
// of the backend's own rate before them (the median over cases), the
// acquire p99 inside the windows and the time to recover after each.
func (ds *dataset) availabilityChart() (*chart, error) {
	var rows []string
	measured := false
	for _, cls := range ds.Classes {
		if cls == faultNone {
			continue
		}
		rows = append(rows, cls)
		for _, b := range ds.Backends {
			t := totals(ds.find(query{Backend: b, Class: cls}))
			measured = measured || len(t.InFault)+len(t.Recovery) > 0
		}
	}
	if !measured {
		return nil, nil
	}
	ch := &chart{
		Name:  "availability",
		Title: "Availability under faults: grants inside the fault windows, tail latency and recovery",
		Read: "Each cell is a fault class (row) for a backend (column): the grants per second inside the fault windows as a share of the same " +
			"cases' rate before the first window " +
			"(median over cases; green near 100%, red near 0%; the scale stops at 100%: a window's share above it — fewer clients contending " +
			"while one is paused, say — reads \"≥100% of base\"), the acquire p99 of the operations begun inside a " +
			"window, and the median time " +
			"from a window's end until grants ran at half the baseline again. " +
			"Grey: the class was not judged for the backend; blue-grey: it ran but recorded no availability.",
	}
	pn := gridPanel{title: "all guards, params and trials of each class pooled", rows: rows}
	for _, cls := range rows {
		var row []gridCell
		for _, b := range ds.Backends {
			gs := ds.find(query{Backend: b, Class: cls})
			if len(gs) == 0 {
				row = append(row, gridCell{fill: cellAbsent, lines: []cellLine{{text: "not judged"}}, dim: true})
				continue
			}
			t := totals(gs)
			share, p99, rec := stats.SpreadOf(t.InFault), stats.SpreadOf(t.InFaultP99), stats.SpreadOf(t.Recovery)
			if share.N+rec.N == 0 {
				row = append(row, gridCell{fill: cellNoData, lines: []cellLine{{text: "no data"}}, dim: true})
				continue
			}
			cell := gridCell{fill: cellNoData}
			if share.N > 0 {
				cell.fill = shareColor(share.Median)
				cell.lines = append(cell.lines, cellLine{shareLabel(share.Median), share.Median < 0.5})
			}
			if p99.N > 0 {
				cell.lines = append(cell.lines, cellLine{"p99 " + fmtUS(p99.Median), false})
			}
			if rec.N > 0 {
				r := "rec " + fmtSeconds(rec.Median) + " s"
				if math.IsInf(rec.Median, 1) {
					r = "not recovered"
				}
				cell.lines = append(cell.lines, cellLine{r, math.IsInf(rec.Max, 1)})
			}
			row = append(row, cell)
		}
		pn.cells = append(pn.cells, row)
	}
	lg := newLegend()
	for _, s := range []float64{1, 0.75, 0.5, 0.25, 0} {
		lg.add(fmt.Sprintf("%s of baseline", fmtPct(s)), swatch{fill: shareColor(s)})
	}
	lg.add("no availability data", swatch{fill: cellNoData})
	lg.add("not judged", swatch{fill: cellAbsent})
	lg.add("")
	lg.add("p99: in-fault p99")
	lg.add("rec: median recovery")
	lg.add("bold: under half the")
	lg.add("baseline, or never")
	lg.add("recovered")
	return gridChartW(ch, ds.Backends, []gridPanel{pn}, lg, "fault class", 1.05*vg.Inch, 1.9*vg.Inch)
}

// shareLabel is a cell's in-fault share of the baseline on the chart's
// capped scale: at most "≥100% of base", since a share above the
// baseline says the window was no worse, not how much better.
func shareLabel(share float64) string {
	if share > 1 {
		return "≥100% of base"
	}
	return fmtPct(share) + " of base"
}
