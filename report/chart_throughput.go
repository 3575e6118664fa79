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

// throughputChart plots grants per second against clients, one line per
// backend, for one workload without faults. Points are the mean over
// trials; a vertical bar shows the trials' min–max when they differ.
// A backend missing from the workload is named in the legend as not
// measured; a zero on a log axis is drawn as a cross on the axis floor
// and said to be zero.
func (ds *dataset) throughputChart(dir, workload string) (*chart, error) {
	guard := ds.primaryGuard(workload, faultNone)
	ch := &chart{
		Name:   "throughput-" + fileSafe(workload),
		Title:  fmt.Sprintf("Throughput vs clients — workload %s, fault none, guard %s", workload, guard),
		Width:  10 * vg.Inch,
		Height: 5.6 * vg.Inch,
		Read: "Each line is a backend; higher is better. A line that flattens or falls as clients grow " +
			"has saturated. Points are the mean over trials, the vertical bars span the slowest to the fastest trial.",
	}
	type series struct {
		backend                    string
		clients, mean, lo, hi      []float64
		trials                     []int
		nodes                      int
		measuredOtherGuard, absent bool
	}
	var all []series
	var values, clients []float64
	for _, b := range ds.Backends {
		s := series{backend: b, nodes: ds.nodes(b)}
		for _, g := range ds.find(group{Backend: b, Workload: workload, Fault: faultNone, Guard: guard}) {
			if g.Clients <= 0 {
				continue
			}
			s.clients = append(s.clients, float64(g.Clients))
			s.mean = append(s.mean, g.Throughput)
			s.lo = append(s.lo, g.ThroughputMin)
			s.hi = append(s.hi, g.ThroughputMax)
			s.trials = append(s.trials, g.Trials)
			values = append(values, g.Throughput, g.ThroughputMin, g.ThroughputMax)
			clients = appendNew(clients, float64(g.Clients))
		}
		if len(s.clients) == 0 {
			s.absent = true
			s.measuredOtherGuard = len(ds.find(group{Backend: b, Workload: workload, Fault: faultNone})) > 0
		}
		all = append(all, s)
	}
	if len(clients) == 0 {
		return nil, nil
	}

	p := newPlot(ch.Title, "concurrent clients (log scale)", "grants per second (mean of trials)")
	logY := rateAxis(&p.Y, values)
	if logY {
		p.Y.Label.Text += ", log scale"
	}
	lo, hi := clients[0], clients[0]
	var ticks []plot.Tick
	for _, c := range clients {
		lo, hi = math.Min(lo, c), math.Max(hi, c)
		ticks = append(ticks, plot.Tick{Value: c, Label: strconv.FormatFloat(c, 'f', -1, 64)})
	}
	p.X.Scale = plot.LogScale{}
	p.X.Min, p.X.Max = lo/1.5, hi*1.5
	p.X.Tick.Marker = plot.ConstantTicks(ticks)

	p.Add(gridLines())
	lg := newLegend()
	spread := &segments{style: draw.LineStyle{Color: color.RGBA{90, 90, 90, 255}, Width: vg.Points(1)}, cap: vg.Points(4)}
	zeros := false
	for _, s := range all {
		st := ds.backendStyle(s.backend)
		if s.absent {
			why := "not measured"
			if s.measuredOtherGuard {
				why = "only with another guard"
			}
			lg.add(fmt.Sprintf("%s: %s", s.backend, why))
			ch.Notes = append(ch.Notes, fmt.Sprintf("%s: %s (workload %s, fault none, guard %s).", s.backend, why, workload, guard))
			continue
		}
		// On a log axis a zero cannot be placed: break the line there and
		// mark the point on the floor with a cross.
		var runX, runY []float64
		flush := func() {
			if len(runX) > 1 {
				p.Add(&polyline{xs: runX, ys: runY, style: st.line})
			}
			runX, runY = nil, nil
		}
		var gx, gy, zx, zy []float64
		for i := range s.clients {
			if logY && s.mean[i] <= 0 {
				flush()
				zx, zy = append(zx, s.clients[i]), append(zy, p.Y.Min)
				continue
			}
			runX, runY = append(runX, s.clients[i]), append(runY, s.mean[i])
			gx, gy = append(gx, s.clients[i]), append(gy, s.mean[i])
			if s.trials[i] > 1 && s.hi[i] > s.lo[i] {
				spread.xs = append(spread.xs, s.clients[i])
				spread.lo = append(spread.lo, s.lo[i])
				spread.hi = append(spread.hi, s.hi[i])
			}
		}
		flush()
		p.Add(&glyphsAt{xs: gx, ys: gy, g: st.glyph})
		if len(zx) > 0 {
			zeros = true
			zg := st.glyph
			zg.Shape, zg.Radius = draw.CrossGlyph{}, vg.Points(5)
			p.Add(&glyphsAt{xs: zx, ys: zy, g: zg})
			ch.Notes = append(ch.Notes, fmt.Sprintf("%s: zero grants/s at %s clients, drawn as a cross on the axis floor.", s.backend, floatsText(zx)))
		}
		lg.add(fmt.Sprintf("%s (%s)", s.backend, nodesText(s.nodes)), lineThumb{st})
	}
	if len(spread.xs) > 0 {
		p.Add(spread)
		lg.add("min–max over trials", spread)
	}
	if zeros {
		lg.add("× on the floor: 0 grants/s", glyphThumb{draw.GlyphStyle{Color: color.Black, Radius: vg.Points(5), Shape: draw.CrossGlyph{}}})
	}
	return ch, ch.render(dir, func(c draw.Canvas) { drawWithLegend(c, p, lg) })
}

// floatsText lists numbers as "4, 16".
func floatsText(vs []float64) string {
	var s []string
	for _, v := range vs {
		s = append(s, strconv.FormatFloat(v, 'f', -1, 64))
	}
	return joinAnd(s)
}

// gridLines returns light major grid lines.
func gridLines() plot.Plotter {
	return &grid{style: draw.LineStyle{Color: color.Gray{Y: 225}, Width: vg.Points(0.5)}}
}

// grid draws lines at the labelled ticks of both axes, behind nothing in
// particular but light enough not to compete with data.
type grid struct{ style draw.LineStyle }

// Plot implements plot.Plotter.
func (g *grid) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, t := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if t.Label != "" && t.Value >= p.X.Min && t.Value <= p.X.Max {
			x := trX(t.Value)
			c.StrokeLine2(g.style, x, c.Min.Y, x, c.Max.Y)
		}
	}
	for _, t := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if t.Label != "" && t.Value >= p.Y.Min && t.Value <= p.Y.Max {
			y := trY(t.Value)
			c.StrokeLine2(g.style, c.Min.X, y, c.Max.X, y)
		}
	}
}
