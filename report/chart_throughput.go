package report

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// profileUnder returns the durability profile most groups of a workload
// ran under a fault, and the others.
func (ds *dataset) profileUnder(workload, fault string) (string, []string) {
	best, n := "", -1
	var all []string
	for _, d := range ds.Durabilities {
		k := len(ds.find(query{Workload: workload, Fault: fault, Durability: d}))
		if k == 0 || (d == profileNoServers && len(ds.Durabilities) > 1) {
			continue
		}
		all = append(all, d)
		if k > n {
			best, n = d, k
		}
	}
	return best, without(all, best)
}

// profileOf is the durability profile of a workload's fault-free
// charts.
func (ds *dataset) profileOf(workload string) string {
	p, _ := ds.profileUnder(workload, faultNone)
	return p
}

// tpSeries is one backend's throughput line: per client count, the
// median over trials and the range.
type tpSeries struct {
	backend                         string
	clients, median, lo, hi         []float64
	trials                          []int
	nodes                           int
	measuredElsewhere, absent, ctrl bool
}

// throughputChart plots grants per second against clients, one line per
// backend, for one workload without faults: points are the median over
// trials and the bars each trial's range. The real locks share the top
// panel; the noop control, which excludes nobody and so runs an order
// of magnitude faster, gets a panel and a scale of its own below, so it
// never squeezes the real locks into one band.
func (ds *dataset) throughputChart(workload string) (*chart, error) {
	tp := ds.throughputPlots(workload)
	if tp == nil {
		return nil, nil
	}
	ch, main, below, lg := tp.ch, tp.main, tp.below, tp.lg
	return ch, ch.render(func(c draw.Canvas) {
		if below == nil {
			main.Title.Text = ch.Title
			drawWithLegend(c, main, lg)
			return
		}
		c = drawTitle(c, ch.Title)
		w := lg.width(c)
		lg.l.Draw(draw.Crop(c, c.Max.X-c.Min.X-w+vg.Points(10), 0, 0, -vg.Points(6)))
		body := draw.Crop(c, 0, -w, 0, 0)
		h := body.Max.Y - body.Min.Y
		drawPlot(draw.Crop(body, 0, 0, h*0.43, 0), main)
		drawPlot(draw.Crop(body, 0, 0, 0, -h*0.63), below)
	})
}

// tpPlots are the panels of a throughput chart: the real locks (main)
// and the control on its own scale (below; nil without it).
type tpPlots struct {
	ch          *chart
	main, below *plot.Plot
	lg          *legend
}

// throughputPlots builds the throughput chart's panels for a workload;
// nil when nothing was measured on it.
func (ds *dataset) throughputPlots(workload string) *tpPlots {
	guard := ds.primaryGuard(workload, faultNone)
	profile, others := ds.profileUnder(workload, faultNone)
	ch := &chart{
		Name:   "throughput-" + fileSafe(workload),
		Title:  fmt.Sprintf("Throughput vs clients — workload %s, fault none, guard %s, %s profile", workload, guard, profile),
		Width:  10 * vg.Inch,
		Height: 5.6 * vg.Inch,
		Read: "Each line is a lock; higher is better. Points are the median over trials, the bars span the slowest to the fastest trial: " +
			"where two locks' bars overlap, this run cannot tell which is faster. The noop control (no exclusion) is drawn apart below, on its " +
			"own scale.",
	}
	for _, o := range others {
		ch.Notes = append(ch.Notes, fmt.Sprintf("Fault-free cases under the %s profile are in the speed table, not drawn here.", o))
	}
	// One way of measuring per chart: goroutine clients of one process and
	// worker processes reporting to a judge over TCP are different
	// experiments, and a line joining them would show the difference as a
	// property of the locks.
	candidates := ds.find(query{Workload: workload, Fault: faultNone, Guard: guard, Durability: profile, EveryProfile: true})
	way := dominantWay(candidates)
	if way != "" {
		ch.Title += ", clients as " + way
	}
	var apart []string
	for _, g := range candidates {
		if w := wayOf(g); w != way {
			apart = appendNew(apart, fmt.Sprintf("%s at %d clients (%s)", g.Backend, g.Clients, w))
		}
	}
	if len(apart) > 0 {
		ch.Notes = append(ch.Notes, fmt.Sprintf("Measured another way, so not drawn on these lines (they are in the speed table): "+
			"%s.", joinAnd(apart)))
	}
	var real, ctrl []tpSeries
	var values, ctrlValues, clients []float64
	var notFree []string
	for _, b := range ds.Backends {
		s := tpSeries{backend: b, nodes: ds.nodes(b), ctrl: ds.isControl(b)}
		for _, g := range ds.find(query{Backend: b, Workload: workload, Fault: faultNone, Guard: guard, Durability: profile,
			EveryProfile: true}) {
			if g.Clients <= 0 || wayOf(g) != way {
				continue
			}
			s.clients = append(s.clients, float64(g.Clients))
			s.median = append(s.median, g.Throughput)
			s.lo = append(s.lo, g.ThroughputMin)
			s.hi = append(s.hi, g.ThroughputMax)
			s.trials = append(s.trials, g.Trials)
			if s.ctrl {
				ctrlValues = append(ctrlValues, g.Throughput, g.ThroughputMin, g.ThroughputMax)
			} else {
				values = append(values, g.Throughput, g.ThroughputMin, g.ThroughputMax)
			}
			clients = appendNew(clients, float64(g.Clients))
		}
		if len(s.clients) == 0 {
			s.absent = true
			s.measuredElsewhere = len(ds.find(query{Backend: b, Workload: workload, Fault: faultNone})) > 0
			if len(ds.find(query{Backend: b, Fault: faultNone})) == 0 {
				notFree = append(notFree, b)
				continue
			}
		}
		if s.ctrl {
			ctrl = append(ctrl, s)
		} else {
			real = append(real, s)
		}
	}
	if len(clients) == 0 {
		return nil
	}
	if len(notFree) > 0 {
		ch.Notes = append(ch.Notes, fmt.Sprintf("Not run without faults, so not drawn: %s.", joinAnd(notFree)))
	}
	hasCtrl := false
	for _, s := range ctrl {
		hasCtrl = hasCtrl || !s.absent
	}
	lg := newLegend()
	main := ds.tpPlot(ch, workload, guard, clients, values, real, lg, "grants per second (median of trials)")
	var below *plot.Plot
	if hasCtrl {
		below = ds.tpPlot(ch, workload, guard, clients, ctrlValues, ctrl, lg, "grants/s")
		below.Title.Text = "the control, on its own scale: noop excludes nobody"
		below.Title.TextStyle = textStyle(labelSize, true)
		main.X.Label.Text = ""
		ch.Height = 8 * vg.Inch
	}
	if len(spreadBars(real, ctrl)) > 0 {
		lg.add("min–max over trials", &segments{style: spreadStyle})
	}
	return &tpPlots{ch: ch, main: main, below: below, lg: lg}
}

// wayOf names how a group's clients ran: "goroutines", "processes", both
// joined when its cases differ, or "" when not recorded.
func wayOf(g *group) string { return strings.Join(g.ClientsAs, " and ") }

// dominantWay is the way of measuring most of the groups used (the first
// in order on a tie).
func dominantWay(gs []*group) string {
	count := map[string]int{}
	var order []string
	for _, g := range gs {
		w := wayOf(g)
		if count[w] == 0 {
			order = append(order, w)
		}
		count[w]++
	}
	best, most := "", 0
	for _, w := range order {
		if count[w] > most {
			best, most = w, count[w]
		}
	}
	return best
}

var spreadStyle = draw.LineStyle{Color: color.RGBA{90, 90, 90, 255}, Width: vg.Points(1)}

// spreadBars returns the client counts of every series point that has a
// range to draw.
func spreadBars(sets ...[]tpSeries) []float64 {
	var out []float64
	for _, set := range sets {
		for _, s := range set {
			for i := range s.clients {
				if s.trials[i] > 1 && s.hi[i] > s.lo[i] {
					out = append(out, s.clients[i])
				}
			}
		}
	}
	return out
}

// tpPlot draws series into a plot over the given client counts and
// adds them to the legend.
func (ds *dataset) tpPlot(ch *chart, workload, guard string, clients, values []float64, all []tpSeries, lg *legend,
	ylabel string) *plot.Plot {
	p := newPlot(ch.Title, "concurrent clients (log scale)", ylabel)
	p.Title.Text = ""
	// Every throughput chart on a log axis, whatever its values span: two
	// charts of a kind read side by side only on the same axis type.
	logY := true
	p.Y.Scale = plot.LogScale{}
	p.Y.Min, p.Y.Max, _ = logRange(values...)
	p.Y.Tick.Marker = logTicks(fmtRate)
	p.Y.Label.Text += ", log scale"
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
	spread := &segments{style: spreadStyle, cap: vg.Points(4)}
	for _, s := range all {
		st := ds.backendStyle(s.backend)
		if s.absent {
			why := "not measured"
			if s.measuredElsewhere {
				why = "only with another guard or profile"
			}
			lg.add(fmt.Sprintf("%s: %s", s.backend, why))
			ch.Notes = append(ch.Notes, fmt.Sprintf("%s: %s (workload %s, fault none, guard %s).", s.backend, why, workload, guard))
			continue
		}
		// On a log axis a zero cannot be placed: break the line there and
		// mark the point on the floor with a cross.
		var runX, runY, gx, gy, zx, zy []float64
		flush := func() {
			if len(runX) > 1 {
				p.Add(&polyline{xs: runX, ys: runY, style: st.line})
			}
			runX, runY = nil, nil
		}
		for i := range s.clients {
			if logY && s.median[i] <= 0 {
				flush()
				zx, zy = append(zx, s.clients[i]), append(zy, p.Y.Min)
				continue
			}
			runX, runY = append(runX, s.clients[i]), append(runY, s.median[i])
			gx, gy = append(gx, s.clients[i]), append(gy, s.median[i])
			if s.trials[i] > 1 && s.hi[i] > s.lo[i] {
				spread.xs = append(spread.xs, s.clients[i])
				spread.lo = append(spread.lo, s.lo[i])
				spread.hi = append(spread.hi, s.hi[i])
			}
		}
		flush()
		p.Add(&glyphsAt{xs: gx, ys: gy, g: st.glyph})
		if len(zx) > 0 {
			zg := st.glyph
			zg.Shape, zg.Radius = draw.CrossGlyph{}, vg.Points(5)
			p.Add(&glyphsAt{xs: zx, ys: zy, g: zg})
			ch.Notes = append(ch.Notes, fmt.Sprintf("%s: zero grants/s at %s clients, drawn as a cross on the axis "+
				"floor.", s.backend, floatsText(zx)))
		}
		name := fmt.Sprintf("%s (%s)", s.backend, nodesText(s.nodes))
		if s.ctrl {
			name = s.backend + " (control, lower panel)"
		}
		lg.add(name, lineThumb{st})
	}
	if len(spread.xs) > 0 {
		p.Add(spread)
	}
	return p
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
