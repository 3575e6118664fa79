package report

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Cell colours of the safety grid.
var (
	cellViolation = color.RGBA{248, 196, 182, 255}
	cellClean     = color.RGBA{198, 233, 212, 255}
	cellAbsent    = color.RGBA{238, 238, 238, 255}
	cellNoTokens  = color.RGBA{255, 232, 160, 255}
	cellCaught    = color.RGBA{190, 214, 240, 255}
	cellEdge      = color.RGBA{255, 255, 255, 255}
)

// guardTitle explains a guard mode in a panel title.
func guardTitle(guard string) string {
	switch guard {
	case guardNone:
		return "guard none: no fencing"
	case guardFence:
		return "guard fence: the resource checks fencing tokens"
	case "cas":
		return "guard cas: the resource compares the lock's random value"
	}
	return "guard " + guard
}

// safetyCell is one fault × backend × guard: the summed counts of all
// its workloads, client counts and trials.
type safetyCell struct {
	measured bool
	t        group
}

func (sc safetyCell) lines() []cellLine {
	if !sc.measured {
		return []cellLine{{text: "not run"}}
	}
	out := []cellLine{
		{fmt.Sprintf("overlaps %d", sc.t.Overlaps), sc.t.Overlaps > 0},
		{fmt.Sprintf("stale acc %d", sc.t.StaleAccepted), sc.t.StaleAccepted > 0},
		{fmt.Sprintf("stale rej %d", sc.t.StaleRejected), false},
	}
	if sc.t.LostUpdates > 0 {
		out = append(out, cellLine{fmt.Sprintf("lost upd %d", sc.t.LostUpdates), true})
	}
	if sc.t.TokenRegressions > 0 {
		out = append(out, cellLine{fmt.Sprintf("token regr %d", sc.t.TokenRegressions), true})
	}
	if sc.t.Unfenced && !sc.t.Fencing {
		out = append(out, cellLine{"no tokens issued", false})
	}
	return out
}

type cellLine struct {
	text string
	bold bool
}

// cellGrid draws a table of coloured cells with text in data
// coordinates: column i, row j is centred on (i, j).
type cellGrid struct {
	cells  [][]safetyCell // [row][col]
	fenced bool           // the panel's guard checks tokens
}

// Plot implements plot.Plotter.
func (cg *cellGrid) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	regular, bold := textStyle(cellSize, false), textStyle(cellSize, true)
	for j, row := range cg.cells {
		for i, cell := range row {
			r := vg.Rectangle{
				Min: vg.Point{X: trX(float64(i) - 0.5), Y: trY(float64(j) - 0.5)},
				Max: vg.Point{X: trX(float64(i) + 0.5), Y: trY(float64(j) + 0.5)},
			}
			fill := cellAbsent
			switch {
			case !cell.measured:
			case cg.fenced && cell.t.Fencing && cell.t.Overlaps > 0 && cell.t.violations() == cell.t.Overlaps:
				fill = cellCaught
			case cell.t.violations() > 0:
				fill = cellViolation
			case cell.t.Unfenced && !cell.t.Fencing:
				fill = cellNoTokens
			default:
				fill = cellClean
			}
			c.SetColor(fill)
			c.Fill(r.Path())
			c.SetLineStyle(draw.LineStyle{Color: cellEdge, Width: vg.Points(2)})
			c.Stroke(r.Path())
			lines := cell.lines()
			lh := regular.Rectangle("Xg").Size().Y
			y := (r.Min.Y+r.Max.Y)/2 + lh*vg.Length(len(lines))/2
			for _, l := range lines {
				sty := regular
				if l.bold {
					sty = bold
				}
				if !cell.measured {
					sty.Color = color.Gray{Y: 110}
				}
				sty.XAlign, sty.YAlign = text.XCenter, text.YTop
				c.FillText(sty, vg.Point{X: (r.Min.X + r.Max.X) / 2, Y: y}, l.text)
				y -= lh
			}
		}
	}
}

// safetyChart draws, for each guard mode, a grid of faults (rows) by
// backends (columns) whose cells hold the overlaps and the stale writes
// accepted and rejected, summed over workloads, client counts and
// trials. Cells are red when any violation was counted, green when none
// was, grey when the combination was not run — so a missing backend or
// fault is visibly missing, never a reassuring zero.
func (ds *dataset) safetyChart(dir string) (*chart, error) {
	if len(ds.Groups) == 0 {
		return nil, nil
	}
	nb, nf := len(ds.Backends), len(ds.Faults)
	ch := &chart{
		Name:  "safety",
		Title: "Safety per fault × backend (counts summed over workloads, client counts and trials)",
		Read: "One panel per resource guard (fencing off and on). Each cell counts, for a fault (row) and a backend " +
			"(column), the times two clients held the lock at once (overlaps) and the stale writes the resource " +
			"accepted or rejected. Red means at least one violation; blue that the lock overlapped but fencing rejected every stale write (no stale write accepted, no lost update, no token regression); green no violation; yellow a fenced run of a backend that issues no " +
			"tokens (nothing to check), grey that the combination was not run.",
	}
	type panel struct {
		guard  string
		cells  [][]safetyCell
		height vg.Length
	}
	var panels []panel
	rowLines := 3
	for _, guard := range ds.Guards {
		pn := panel{guard: guard}
		lines := 3
		for j := nf - 1; j >= 0; j-- { // first fault on top
			var row []safetyCell
			for _, b := range ds.Backends {
				gs := ds.find(group{Backend: b, Fault: ds.Faults[j], Guard: guard})
				cell := safetyCell{measured: len(gs) > 0, t: totals(gs)}
				lines = max(lines, len(cell.lines()))
				row = append(row, cell)
			}
			pn.cells = append(pn.cells, row)
		}
		rowLines = max(rowLines, lines)
		panels = append(panels, pn)
	}
	rowH := vg.Length(rowLines)*vg.Points(cellSize*1.25) + vg.Points(10)
	for i := range panels {
		panels[i].height = vg.Length(nf)*rowH + vg.Inch*1.05
	}
	lg := newLegend()
	lg.add("at least one violation", swatch{fill: cellViolation})
	lg.add("overlaps, but fencing rejected", swatch{fill: cellCaught})
	lg.add("   every stale write")
	lg.add("no violation counted", swatch{fill: cellClean})
	lg.add("fenced, but no tokens to check", swatch{fill: cellNoTokens})
	lg.add("combination not run", swatch{fill: cellAbsent})
	lg.add("")
	lg.add("overlaps: two holders at once")
	lg.add("stale acc: stale write accepted")
	lg.add("stale rej: stale write rejected")
	lg.add("lost upd: lost counter updates")
	lg.add("token regr: token went back")
	lg.add("bold: a violation count")

	colW := vg.Inch * 1.25
	ch.Width = max(10*vg.Inch, vg.Length(nb)*colW+1.6*vg.Inch+2.6*vg.Inch)
	ch.Height = vg.Inch * 0.55
	for _, pn := range panels {
		ch.Height += pn.height
	}
	var plots []*plot.Plot
	for _, pn := range panels {
		xlabel := ""
		if len(plots) == len(panels)-1 {
			xlabel = "backend"
		}
		p := newPlot(guardTitle(pn.guard), xlabel, "fault")
		p.Title.TextStyle = textStyle(labelSize+0.5, true)
		p.Title.TextStyle.XAlign, p.Title.TextStyle.YAlign = draw.XCenter, draw.YTop
		p.NominalX(ds.Backends...)
		fitNominalX(p, ds.Backends, vg.Length(nb)*colW)
		p.NominalY(reversed(ds.Faults)...)
		p.X.Padding, p.Y.Padding = 0, 0
		p.X.Min, p.X.Max = -0.5, float64(nb)-0.5
		p.Y.Min, p.Y.Max = -0.5, float64(nf)-0.5
		p.Add(&cellGrid{cells: pn.cells, fenced: pn.guard == guardFence})
		plots = append(plots, p)
	}
	for _, pn := range panels {
		for i, b := range ds.Backends {
			var faults []string
			for j := nf - 1; j >= 0; j-- {
				if cell := pn.cells[j][i]; cell.measured && cell.t.Unfenced && !cell.t.Fencing {
					faults = append(faults, ds.Faults[nf-1-j])
				}
			}
			if len(faults) > 0 {
				ch.Notes = append(ch.Notes, fmt.Sprintf("%s: guard %s ran under %s, but the backend issued no tokens for the resource to check.", b, pn.guard, joinAnd(faults)))
			}
		}
	}
	return ch, ch.render(dir, func(c draw.Canvas) {
		c = drawTitle(c, ch.Title)
		w := lg.width(c)
		body := draw.Crop(c, 0, -w, 0, 0)
		lg.l.Draw(draw.Crop(c, c.Max.X-c.Min.X-w+vg.Points(10), 0, 0, -vg.Points(30)))
		drawStacked(body, plots)
	})
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
