package report

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/lockbench/lockbench/results"
)

var (
	shadeFill = color.NRGBA{R: 240, G: 160, B: 40, A: 70}
	shadeEdge = color.NRGBA{R: 200, G: 120, B: 20, A: 200}
)

// shade fills the fault windows across the full height of a panel or,
// with labels set, writes each window's label at its top where it fits
// (a second pass, so the labels sit above grid lines and data).
type shade struct {
	windows []windowSpan
	labels  bool
}

type windowSpan struct {
	label      string
	start, end float64
}

// Plot implements plot.Plotter.
func (s *shade) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	sty := textStyle(tickSize-1, false)
	sty.XAlign, sty.YAlign = text.XLeft, text.YTop
	for i, w := range s.windows {
		x0, x1 := trX(clamp(p.X, w.start)), trX(clamp(p.X, w.end))
		if x1-x0 < vg.Points(1.5) {
			x1 = x0 + vg.Points(1.5) // an instant fault stays visible
		}
		if !s.labels {
			r := vg.Rectangle{Min: vg.Point{X: x0, Y: c.Min.Y}, Max: vg.Point{X: x1, Y: c.Max.Y}}
			c.SetColor(shadeFill)
			c.Fill(r.Path())
			continue
		}
		if w.label == "" {
			continue
		}
		// Inside the window when it fits, else just right of it when
		// that space is free up to the next window.
		width := sty.Width(w.label) + vg.Points(4)
		limit := c.Max.X
		if i+1 < len(s.windows) {
			limit = trX(clamp(p.X, s.windows[i+1].start))
		}
		switch {
		case width < x1-x0:
			c.FillText(sty, vg.Point{X: x0 + vg.Points(2), Y: c.Max.Y - vg.Points(2)}, w.label)
		case x1+width < limit:
			c.FillText(sty, vg.Point{X: x1 + vg.Points(3), Y: c.Max.Y - vg.Points(2)}, w.label)
		}
	}
}

// timelineCombo is the workload, guard and client count of the cases a
// timeline shows.
type timelineCombo struct {
	workload, guard, profile string
	clients                  int
}

func (tc timelineCombo) String() string {
	return fmt.Sprintf("workload %s, guard %s, %d clients, %s profile", tc.workload, tc.guard, tc.clients, tc.profile)
}

// timelineGroups picks, for a fault, one group per backend: the
// combination of workload, guard and clients measured (with a timeline)
// by the most backends, so that panels compare like with like; a
// backend without it shows its own first combination, named in its
// panel title.
func (ds *dataset) timelineGroups(fault string) (common timelineCombo, picked []*group, notes []string) {
	count := map[timelineCombo]int{}
	for _, g := range ds.find(query{Fault: fault}) {
		if len(g.Timeline) > 0 {
			count[timelineCombo{g.Workload, g.Guard, g.profile(), g.Clients}]++
		}
	}
	combos := make([]timelineCombo, 0, len(count))
	for c := range count {
		combos = append(combos, c)
	}
	order := func(a, b timelineCombo) int {
		return cmp.Or(cmp.Compare(count[b], count[a]), compareGuards(a.guard, b.guard), cmp.Compare(rank(a.profile, results.DurabilityFast),
			rank(b.profile, results.DurabilityFast)),
			cmp.Compare(slices.Index(ds.Workloads, a.workload), slices.Index(ds.Workloads, b.workload)),
			cmp.Compare(b.clients, a.clients))
	}
	slices.SortFunc(combos, order)
	if len(combos) == 0 {
		return common, nil, nil
	}
	common = combos[0]
	for _, b := range ds.Backends {
		gs := ds.find(query{Backend: b, Fault: fault})
		if len(gs) == 0 {
			if class := ds.classOfFault(fault); len(ds.find(query{Backend: b, Class: class})) == 0 {
				notes = append(notes, fmt.Sprintf("%s: not run under %s — %s.", b, fault, ds.notJudged(b, class)))
			} else {
				notes = append(notes, fmt.Sprintf("%s: not run under %s, only under other params of %s.", b, fault, class))
			}
			continue
		}
		var best *group
		for _, g := range gs {
			if len(g.Timeline) == 0 {
				continue
			}
			if best == nil || order(timelineCombo{g.Workload, g.Guard, g.profile(), g.Clients}, timelineCombo{best.Workload, best.Guard,
				best.profile(), best.Clients}) < 0 {
				best = g
			}
		}
		if best == nil {
			notes = append(notes, fmt.Sprintf("%s: ran under %s but recorded no timeline.", b, fault))
			continue
		}
		picked = append(picked, best)
	}
	return common, picked, notes
}

// classOfFault returns the class of a fault name as its groups record
// it.
func (ds *dataset) classOfFault(fault string) string {
	if gs := ds.find(query{Fault: fault}); len(gs) > 0 {
		return gs[0].FaultClass
	}
	return baseName(fault)
}

// timelineChart draws one panel per backend for a fault: grants per
// second in each timeline step (the mean over trials), with the fault
// windows shaded. Panels share the time axis but not the rate axis, so
// a slow backend's dip is as visible as a fast one's.
func (ds *dataset) timelineChart(fault string) (*chart, error) {
	common, picked, notes := ds.timelineGroups(fault)
	if len(picked) == 0 {
		return nil, nil
	}
	ch := &chart{
		Name:  "timeline-" + fileSafe(fault),
		Title: fmt.Sprintf("Grants over time under %s — %s", fault, common),
		Notes: notes,
		Read: "One panel per backend: grants per second in each step of the run (the mean over trials), with the " +
			"fault windows shaded. A dip to zero inside or after a window is unavailability; how fast the line " +
			"returns to its earlier level is the recovery time. Each panel has its own vertical scale.",
	}
	panelH := 1.7 * vg.Inch
	ch.Width = 10 * vg.Inch
	ch.Height = max(4.2*vg.Inch, vg.Length(len(picked))*panelH+1.1*vg.Inch)
	tmax := 0.0
	for _, g := range picked {
		tmax = max(tmax, float64(len(g.Timeline))*g.TimelineStepS)
		for _, w := range g.Windows {
			tmax = max(tmax, w.EndS)
		}
	}
	var plots []*plot.Plot
	for i, g := range picked {
		title := g.Backend
		if combo := (timelineCombo{g.Workload, g.Guard, g.profile(), g.Clients}); combo != common {
			title += " — " + combo.String()
		}
		title += fmt.Sprintf(" (%s, step %s s)", plural(int64(g.Trials), "trial"), fmtSeconds(g.TimelineStepS))
		xlabel := ""
		if i == len(picked)-1 {
			xlabel = "time since the case started (s)"
		}
		p := newPlot(title, xlabel, "grants/s")
		p.Title.TextStyle = textStyle(labelSize, true)
		p.Title.TextStyle.XAlign, p.Title.TextStyle.YAlign = draw.XCenter, draw.YTop
		p.Title.Padding = vg.Points(3)
		p.X.Min, p.X.Max = 0, max(tmax, 1)
		ymax := 0.0
		for _, v := range g.Timeline {
			ymax = max(ymax, v)
		}
		p.Y.Min, p.Y.Max = 0, max(ymax*1.4, 1) // headroom for the window labels
		p.X.Tick.Marker = niceTicks(10, fmtSeconds)
		p.Y.Tick.Marker = linearTicks(fmtRate)
		var spans []windowSpan
		var wtext []string
		for _, w := range g.Windows {
			spans = append(spans, windowSpan{w.Label, w.StartS, w.EndS})
			wtext = append(wtext, fmt.Sprintf("%s %s–%s s", orUnset(w.Label, "fault"), fmtSeconds(w.StartS), fmtSeconds(w.EndS)))
		}
		if len(wtext) > 0 {
			ch.Notes = append(ch.Notes, fmt.Sprintf("%s fault windows: %s.", g.Backend, strings.Join(wtext, "; ")))
		} else {
			ch.Notes = append(ch.Notes, fmt.Sprintf("%s: no fault window was recorded under %s.", g.Backend, fault))
		}
		p.Add(&shade{windows: spans}, gridLines())
		step := &polyline{style: ds.backendStyle(g.Backend).line}
		for j, v := range g.Timeline {
			t := float64(j) * g.TimelineStepS
			step.xs = append(step.xs, t, t+g.TimelineStepS)
			step.ys = append(step.ys, v, v)
		}
		p.Add(step, &shade{windows: spans, labels: true})
		plots = append(plots, p)
	}
	lg := newLegend()
	lg.add("grants/s in each step", lineOnly{draw.LineStyle{Color: color.Black, Width: vg.Points(2)}})
	lg.add("(mean over trials)")
	lg.add("fault window", swatch{fill: shadeFill, edge: shadeEdge})
	addMissing(lg, notes)
	return ch, ch.render(func(c draw.Canvas) {
		c = drawTitle(c, ch.Title)
		w := lg.width(c)
		lg.l.Draw(draw.Crop(c, c.Max.X-c.Min.X-w+vg.Points(10), 0, 0, -vg.Points(20)))
		body := draw.Crop(c, 0, -w, 0, 0)
		drawStacked(body, plots)
	})
}

// drawStacked draws plots one above the other in c, their data areas
// aligned and of equal size whatever their tick labels.
func drawStacked(c draw.Canvas, plots []*plot.Plot) {
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(2), PadBottom: vg.Points(2)}
	for i, cs := range plot.Align(rows, tiles, c) {
		drawPlot(cs[0], plots[i])
	}
}

// niceTicks labels at most about n steps of 1, 2 or 5 times a power of
// ten, with fmtLabel.
func niceTicks(n int, fmtLabel func(float64) string) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		if !(hi > lo) || n < 1 {
			return nil
		}
		raw := (hi - lo) / float64(n)
		mag := math.Pow(10, math.Floor(math.Log10(raw)))
		step := mag * 10
		for _, m := range []float64{1, 2, 5} {
			if m*mag >= raw {
				step = m * mag
				break
			}
		}
		var ticks []plot.Tick
		for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
			ticks = append(ticks, plot.Tick{Value: v, Label: fmtLabel(v)})
		}
		return ticks
	})
}
