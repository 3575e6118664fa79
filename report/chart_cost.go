package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// costGroups picks, per backend, the fault-free group with the fewest
// clients (1 when measured) on the workload and profile where the most
// backends have one: there nobody waits, so the acquire latency is the
// lock's own work.
func (ds *dataset) costGroups() (picked []*group, clients int, workload, profile string) {
	type combo struct {
		w, d string
		c    int
	}
	count := map[combo]int{}
	for _, g := range ds.find(query{Fault: faultNone}) {
		if g.Clients > 0 && g.Acquired > 0 && !serverless(g) {
			count[combo{g.Workload, g.profile(), g.Clients}]++
		}
	}
	var best combo
	for c, n := range count {
		if best.c == 0 || c.c < best.c || (c.c == best.c && (n > count[best] || (n == count[best] && c.w+c.d < best.w+best.d))) {
			best = c
		}
	}
	if best.c == 0 {
		return nil, 0, "", ""
	}
	for _, b := range ds.Backends {
		gs := ds.find(query{Backend: b, Workload: best.w, Fault: faultNone, Clients: best.c, Durability: best.d, EveryProfile: true})
		var g *group
		for _, x := range gs {
			if x.Acquired > 0 && (g == nil || x.Guard == guardNone) {
				g = x
			}
		}
		if g != nil {
			picked = append(picked, g)
		}
	}
	return picked, best.c, best.w, best.d
}

// costChart shows each lock's own cost: acquire plus release latency
// with nobody waiting and without the hold, per backend — the median
// over trials of p50 acquire + p50 release with the trials' range, and
// the p99 sum. On one hot key the hold caps every fast lock at the same
// rate; this is what the lock itself adds.
func (ds *dataset) costChart() (*chart, error) {
	picked, clients, workload, profile := ds.costGroups()
	if len(picked) == 0 {
		return nil, nil
	}
	ch := &chart{
		Name: "own-cost",
		Title: fmt.Sprintf("Each lock's own cost: acquire + release at %d client, no fault (workload %s, %s "+
			"profile)", clients, workload, profile),
		Width:  10 * vg.Inch,
		Height: 5.6 * vg.Inch,
		Read: "What one lock + unlock costs a client when nobody else wants the key, without the time the lock is held: the dot is the median " +
			"over trials of p50 acquire + p50 release, " +
			"its bar the trials' range, the triangle the p99 of acquire + release. Lower is better; the axis is logarithmic. On one hot key the 1 " +
			"ms hold caps every fast lock near 1,000 grants/s, so this, not the throughput chart, shows what each lock itself adds.",
	}
	if clients > 1 {
		ch.Notes = append(ch.Notes, fmt.Sprintf("No fault-free case ran with 1 client; the fewest was %d, so some waiting is included.", clients))
	}
	var names []string
	var values []float64
	for _, g := range picked {
		names = append(names, g.Backend)
		values = append(values, g.OwnCost.Min, g.OwnCost.Max, float64(g.Latency.P99+g.Release.P99))
	}
	p := newPlot(ch.Title, "backend", "acquire + release (log scale)")
	p.NominalX(names...)
	fitNominalX(p, names, 7*vg.Inch)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.Y.Scale = plot.LogScale{}
	p.Y.Min, p.Y.Max, _ = logRange(values...)
	p.Y.Tick.Marker = logTicks(fmtUS)
	p.Add(gridLines())
	spread := &segments{style: spreadStyle, cap: vg.Points(4)}
	lg := newLegend()
	for i, g := range picked {
		st := ds.backendStyle(g.Backend)
		x := float64(i)
		if g.OwnCost.N > 1 && g.OwnCost.Max > g.OwnCost.Min {
			spread.xs, spread.lo, spread.hi = append(spread.xs, x), append(spread.lo, g.OwnCost.Min), append(spread.hi, g.OwnCost.Max)
		}
		dot := st.glyph
		dot.Shape, dot.Radius = draw.CircleGlyph{}, vg.Points(5)
		p.Add(&glyphsAt{xs: []float64{x}, ys: []float64{math.Max(g.OwnCost.Median, p.Y.Min)}, g: dot})
		tail := st.glyph
		tail.Shape, tail.Radius = draw.PyramidGlyph{}, vg.Points(4)
		p.Add(&glyphsAt{xs: []float64{x}, ys: []float64{math.Max(float64(g.Latency.P99+g.Release.P99), p.Y.Min)}, g: tail})
		label := fmt.Sprintf("%s: %s", g.Backend, fmtUS(g.OwnCost.Median))
		if ds.isControl(g.Backend) {
			label += " (control)"
		}
		lg.add(label, glyphThumb{dot})
	}
	if len(spread.xs) > 0 {
		p.Add(spread)
		lg.add("min–max over trials", spread)
	}
	lg.add("p99 acquire + release", glyphThumb{draw.GlyphStyle{Color: color.Black, Radius: vg.Points(4), Shape: draw.PyramidGlyph{}}})
	var missing []string
	for _, b := range ds.Backends {
		found := false
		for _, g := range picked {
			found = found || g.Backend == b
		}
		if !found && len(ds.find(query{Backend: b, Fault: faultNone})) > 0 {
			missing = append(missing, fmt.Sprintf("%s: no fault-free case with %d client on workload %s (%s "+
				"profile).", b, clients, workload, profile))
		}
	}
	ch.Notes = append(ch.Notes, missing...)
	addMissing(lg, missing)
	return ch, ch.render(func(c draw.Canvas) { drawWithLegend(c, p, lg) })
}
