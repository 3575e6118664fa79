package report

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// latencyClients picks the client count of the latency charts for a
// workload: want when it was measured, else the count at which the most
// backends were measured (the larger on a tie, where contention shows).
func (ds *dataset) latencyClients(workload, guard string, want int) int {
	count := map[int]int{}
	for _, g := range ds.find(query{Workload: workload, Fault: faultNone, Guard: guard}) {
		if g.Clients > 0 {
			count[g.Clients]++
		}
	}
	if count[want] > 0 {
		return want
	}
	best := 0
	for c, n := range count {
		if n > count[best] || (n == count[best] && c > best) {
			best = c
		}
	}
	return best
}

var percentileStyles = []struct {
	label string
	color color.Color
	shape draw.GlyphDrawer
	get   func(g *group) int64
}{
	{"p50 (median)", color.RGBA{0, 114, 178, 255}, draw.CircleGlyph{}, func(g *group) int64 { return g.Latency.P50 }},
	{"p99", color.RGBA{213, 94, 0, 255}, draw.PyramidGlyph{}, func(g *group) int64 { return g.Latency.P99 }},
	{"p99.9", color.RGBA{0, 0, 0, 255}, draw.BoxGlyph{}, func(g *group) int64 { return g.Latency.P999 }},
}

// latencyCases returns, per backend, the group the latency charts use
// for a workload, and notes on what is missing.
func (ds *dataset) latencyCases(workload, guard string, clients int) (present []*group, notes []string) {
	profile, _ := ds.profileUnder(workload, faultNone)
	for _, b := range ds.Backends {
		gs := ds.find(query{Backend: b, Workload: workload, Fault: faultNone, Guard: guard, Clients: clients, Durability: profile,
			EveryProfile: true})
		switch {
		case len(gs) == 0 && len(ds.find(query{Backend: b, Fault: faultNone})) == 0:
			// never run without faults (a variant): nothing to miss here
		case len(gs) == 0:
			notes = append(notes, fmt.Sprintf("%s: not measured at %d clients (workload %s, fault none, guard %s).", b, clients, workload, guard))
		case gs[0].Acquired == 0 && gs[0].Latency.P999 == 0:
			notes = append(notes, fmt.Sprintf("%s: no acquire succeeded at %d clients, so it has no latency.", b, clients))
		default:
			present = append(present, gs[0])
		}
	}
	return present, notes
}

// latencyChart shows acquire-latency p50, p99 and p99.9 per backend at
// one client count, on a log axis. Each backend's three percentiles sit
// side by side, joined by a grey line whose slope shows how fast the
// tail grows. Backends without data are named in the legend.
func (ds *dataset) latencyChart(workload string, want int) (*chart, error) {
	guard := ds.primaryGuard(workload, faultNone)
	clients := ds.latencyClients(workload, guard, want)
	if clients == 0 {
		return nil, nil
	}
	present, notes := ds.latencyCases(workload, guard, clients)
	if len(present) == 0 {
		return nil, nil
	}
	ch := &chart{
		Name: "latency-" + fileSafe(workload),
		Title: fmt.Sprintf("Acquire latency percentiles — workload %s, %d clients, fault none, guard %s, %s "+
			"profile", workload, clients, guard, ds.profileOf(workload)),
		Width:  10 * vg.Inch,
		Height: 5.6 * vg.Inch,
		Notes:  notes,
		Read: "For each backend, the circle is the median wait for a lock, the triangle p99 and the square p99.9; " +
			"lower is better. The axis is logarithmic: each grid line is ten times the one below, " +
			"so a steep grey line means a long tail.",
	}
	if want > 0 && clients != want {
		ch.Notes = append(ch.Notes, fmt.Sprintf("%d clients were asked for but not measured on workload %s; showing "+
			"%d.", want, workload, clients))
	}
	var values []float64
	var names []string
	for _, g := range present {
		names = append(names, g.Backend)
		for _, ps := range percentileStyles {
			values = append(values, float64(ps.get(g)))
		}
	}
	p := newPlot(ch.Title, "backend", "time to acquire (log scale)")
	p.NominalX(names...)
	fitNominalX(p, names, 7*vg.Inch)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.Y.Scale = plot.LogScale{}
	p.Y.Min, p.Y.Max, _ = logRange(values...)
	p.Y.Tick.Marker = logTicks(fmtUS)
	p.Add(gridLines())

	const offset = 0.2
	joint := draw.LineStyle{Color: color.Gray{Y: 150}, Width: vg.Points(1.5)}
	zeroes := false
	for i, g := range present {
		x := float64(i)
		line := &polyline{style: joint}
		for j := range percentileStyles {
			v := float64(percentileStyles[j].get(g))
			line.xs = append(line.xs, x+offset*float64(j-1))
			line.ys = append(line.ys, math.Max(v, p.Y.Min))
			zeroes = zeroes || v <= 0
		}
		p.Add(line)
	}
	lg := newLegend()
	for j, ps := range percentileStyles {
		gs := draw.GlyphStyle{Color: ps.color, Radius: vg.Points(5), Shape: ps.shape}
		pts := &glyphsAt{g: gs}
		for i, g := range present {
			pts.xs = append(pts.xs, float64(i)+offset*float64(j-1))
			pts.ys = append(pts.ys, float64(ps.get(g)))
		}
		p.Add(pts)
		lg.add(ps.label, glyphThumb{gs})
	}
	if zeroes {
		ch.Notes = append(ch.Notes, "A percentile of 0 µs (below the histogram's 1 µs resolution) is drawn on the axis floor.")
	}
	addMissing(lg, notes)
	return ch, ch.render(func(c draw.Canvas) { drawWithLegend(c, p, lg) })
}

// addMissing lists, under "no data here:", the backends that notes
// (sentences starting "backend: ...") say are missing; the full
// sentences go under the chart.
func addMissing(lg *legend, notes []string) {
	var missing []string
	for _, n := range notes {
		if i := strings.Index(n, ":"); i > 0 {
			missing = appendNew(missing, n[:i])
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		lg.add("no data here:")
		for _, m := range missing {
			lg.add("   " + m)
		}
	}
}

// lineOnly is a legend thumbnail of a line without a glyph.
type lineOnly struct{ s draw.LineStyle }

// Thumbnail implements plot.Thumbnailer.
func (t lineOnly) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(t.s, c.Min.X, y, c.Max.X, y)
}
