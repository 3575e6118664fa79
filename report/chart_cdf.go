package report

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// cdfCurve is the step CDF of one backend's merged acquire histogram.
type cdfCurve struct {
	g      *group
	xs, ys []float64
}

// cdfOf returns the CDF of g's histogram as points (latency µs, fraction
// ≤ it), thinned to one point per 0.2% of the body but every point of
// the top 1%, where the tail lives. Values below 1 µs sit at 1 µs.
func cdfOf(g *group) cdfCurve {
	cv := cdfCurve{g: g}
	total := float64(g.hist.TotalCount())
	var cum int64
	last := -1.0
	for _, bar := range g.hist.Distribution() {
		if bar.Count == 0 {
			continue
		}
		if len(cv.xs) == 0 {
			cv.xs, cv.ys = append(cv.xs, float64(max(bar.From, 1))), append(cv.ys, 0)
		}
		cum += bar.Count
		y := float64(cum) / total
		if y-last >= 0.002 || y > 0.99 {
			cv.xs, cv.ys = append(cv.xs, float64(max(bar.To, 1))), append(cv.ys, y)
			last = y
		}
	}
	return cv
}

// cdfChart plots, per backend, the fraction of acquires that waited at
// most x, from the merged HDR histograms, on a log time axis. Backends
// with no histogram, or not run at the chosen client count, are named in
// the legend and the notes.
func (ds *dataset) cdfChart(workload string, want int) (*chart, error) {
	guard := ds.primaryGuard(workload, faultNone)
	clients := ds.latencyClients(workload, guard, want)
	if clients == 0 {
		return nil, nil
	}
	present, notes := ds.latencyCases(workload, guard, clients)
	ch := &chart{
		Name: "cdf-" + fileSafe(workload),
		Title: fmt.Sprintf("Acquire latency CDF — workload %s, %d clients, fault none, guard %s, %s "+
			"profile", workload, clients, guard, ds.profileOf(workload)),
		Width:  10 * vg.Inch,
		Height: 5.6 * vg.Inch,
		Read: "A point (x, y) means a fraction y of all acquires waited at most x. Curves further left are faster; " +
			"a curve that bends right before reaching 1 has a long tail (read p99 where it crosses the dashed 0.99 line). The vertical axis " +
			"spaces 0.9, 0.99, 0.999 evenly so the tail is visible.",
	}
	var curves []cdfCurve
	var values []float64
	for _, g := range present {
		if g.hist == nil || g.hist.TotalCount() == 0 {
			notes = append(notes, fmt.Sprintf("%s: no latency histogram recorded.", g.Backend))
			continue
		}
		if !g.LatencyPooled {
			ch.Notes = append(ch.Notes, fmt.Sprintf("%s: some trials had no histogram; its curve shows the trials that had one.", g.Backend))
		}
		cv := cdfOf(g)
		values = append(values, cv.xs...)
		curves = append(curves, cv)
	}
	ch.Notes = append(ch.Notes, notes...)
	if len(curves) == 0 {
		return nil, nil
	}
	p := newPlot(ch.Title, "time to acquire (log scale)", "fraction of acquires ≤ x (nines scale)")
	p.X.Scale = plot.LogScale{}
	p.X.Min, p.X.Max, _ = logRange(values...)
	p.X.Tick.Marker = logTicks(fmtUS)
	// A linear fraction axis squeezes the top 1% — the tail — into a
	// hair: space the nines evenly instead, as far as the sample count
	// can resolve.
	// The top is the deepest nine the largest sample resolves: 0.999
	// needs 1000 acquires.
	var most int64
	for _, cv := range curves {
		most = max(most, cv.g.hist.TotalCount())
	}
	top := 1 - math.Pow(10, -math.Min(math.Max(math.Floor(math.Log10(float64(most))), 2), 5))
	p.Y.Scale = ninesScale{}
	p.Y.Min, p.Y.Max = 0, top
	ticks := plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.5, Label: "0.5"}}
	for q := 0.9; q <= top+1e-12; q = 1 - (1-q)/10 {
		ticks = append(ticks, plot.Tick{Value: q, Label: strconv.FormatFloat(q, 'f', -1, 64)})
	}
	p.Y.Tick.Marker = ticks
	p.Add(gridLines())
	ref := draw.LineStyle{Color: color.Gray{Y: 110}, Width: vg.Points(0.9), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}
	for _, y := range []float64{0.5, 0.99, 0.999} {
		if y > top {
			continue
		}
		p.Add(&polyline{xs: []float64{p.X.Min, p.X.Max}, ys: []float64{y, y}, style: ref})
	}
	lg := newLegend()
	for _, cv := range curves {
		st := ds.backendStyle(cv.g.Backend)
		p.Add(&polyline{xs: cv.xs, ys: cv.ys, style: st.line})
		lg.add(fmt.Sprintf("%s (%s acquires)", cv.g.Backend, fmtRate(float64(cv.g.hist.TotalCount()))), lineOnly{st.line})
	}
	lg.add("p50, p99, p99.9 levels", lineOnly{ref})
	addMissing(lg, notes)
	return ch, ch.render(func(c draw.Canvas) { drawWithLegend(c, p, lg) })
}

// ninesScale spaces fractions by their nines: 0.9, 0.99 and 0.999 are
// equally far apart, so the tail of a distribution gets as much room as
// its body. Values at or above the axis maximum sit at the top.
type ninesScale struct{}

// Normalize implements plot.Normalizer.
func (ninesScale) Normalize(lo, hi, x float64) float64 {
	f := func(q float64) float64 { return -math.Log10(1 - math.Min(math.Max(q, 0), hi)) }
	return (f(x) - f(lo)) / (f(hi) - f(lo))
}
