package report

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// regionColor shades the service's own environment on an envelope.
var regionColor = color.NRGBA{120, 170, 230, 70}

// envelopeCharts draws one chart per fault family of f's envelopes: two
// panels (lock bugs; late writes under the first guard searched), the
// x axis the fault's size in the family's unit (log), one line per lock
// through its points' observed rates with the 95% bound band, each
// boundary's first event marked, where the fault stops testing dashed,
// and the profile's region shaded.
func envelopeCharts(dir string, f *results.File, p *results.Profile) (map[string]*chart, error) {
	out := map[string]*chart{}
	order := map[string]int{}
	for _, e := range f.Envelopes {
		if _, ok := order[e.Backend]; !ok {
			order[e.Backend] = len(order)
		}
	}
	for _, fam := range envelopeFamilies(f) {
		var es []results.Envelope
		for _, e := range f.Envelopes {
			if e.Family == fam {
				es = append(es, e)
			}
		}
		ch := &chart{
			Name:  "envelope-" + fam,
			Title: fmt.Sprintf("Where each lock breaks under %s", fam),
			Read: "x: the fault's size over the lock's " + es[0].Unit + " (log); y: the share of tested injections followed by the event, " +
				"each point a probe, the band its exact 95% bounds; a ring marks each lock's first event (its boundary), a dashed " +
				"line the size from which no injection tested; " +
				"the shaded region, when a profile is given, is the service's own environment.",
			Width: 12 * vg.Inch, Height: 4.6 * vg.Inch,
		}
		events := []string{results.EventLockBug}
		for _, b := range es[0].Boundaries {
			if b.Event != results.EventLockBug {
				events = append(events, b.Event)
				break
			}
		}
		var plots []*plot.Plot
		lg := newLegend()
		edges := false
		for i, ev := range events {
			title := "lock bugs"
			if ev != results.EventLockBug {
				title = "late writes, guard " + strings.TrimPrefix(ev, "late-write:")
			}
			pl := newPlot(title, envelopeAxis(fam, es[0]), "share of tested injections")
			pl.X.Scale = plot.LogScale{}
			pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
			pl.Y.Min, pl.Y.Max = 0, 1
			lo, hi := math.Inf(1), 0.0
			for _, e := range es {
				lo, hi = math.Min(lo, e.MinSize), math.Max(hi, e.MaxSize)
			}
			pl.X.Min, pl.X.Max = lo/1.1, hi*1.1
			if r, ok := ProfileRegion(p, es[0]); ok && r.Size > 0 {
				x := clamp(pl.X, r.Size)
				poly, err := plotter.NewPolygon(plotter.XYs{{X: pl.X.Min, Y: 0}, {X: x, Y: 0}, {X: x, Y: 1}, {X: pl.X.Min, Y: 1}})
				if err == nil {
					poly.Color, poly.LineStyle.Width = regionColor, 0
					pl.Add(poly)
					if i == 0 {
						lg.add(r.Label, poly)
					}
				}
			}
			for _, e := range es {
				st := styleFor(order[e.Backend])
				var line, upper, lower plotter.XYs
				for _, pt := range e.Points {
					if pt.Tested == 0 {
						continue
					}
					rt := stats.Rate{K: int64(pt.Count(ev)), N: int64(pt.Tested)}
					line = append(line, plotter.XY{X: pt.Size, Y: rt.Observed()})
					upper = append(upper, plotter.XY{X: pt.Size, Y: rt.Upper95()})
					lower = append(lower, plotter.XY{X: pt.Size, Y: rt.Lower95()})
				}
				if len(line) == 0 {
					continue
				}
				band := append(upper, reverse(lower)...)
				if poly, err := plotter.NewPolygon(band); err == nil {
					r, g, bl, _ := st.line.Color.RGBA()
					poly.Color, poly.LineStyle.Width = color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), 30}, 0
					pl.Add(poly)
				}
				l, s, err := plotter.NewLinePoints(line)
				if err != nil {
					return nil, err
				}
				l.LineStyle, s.GlyphStyle = st.line, st.glyph
				pl.Add(l, s)
				for _, b := range e.Boundaries {
					if b.Event != ev || b.First == 0 {
						continue
					}
					m, err := plotter.NewScatter(plotter.XYs{{X: b.First, Y: float64(b.FirstCount) / float64(max(b.FirstTested, 1))}})
					if err == nil {
						m.GlyphStyle = draw.GlyphStyle{Color: st.line.Color, Radius: vg.Points(8), Shape: draw.RingGlyph{}}
						pl.Add(m)
					}
				}
				if e.Edge != nil {
					// From here no injection tested: no rate, and no safety either.
					edge, err := plotter.NewLine(plotter.XYs{{X: e.Edge.Untested, Y: 0}, {X: e.Edge.Untested, Y: 1}})
					if err == nil {
						edge.LineStyle = st.line
						edge.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
						pl.Add(edge)
						edges = true
					}
				}
				if i == 0 {
					lg.add(e.Backend, l, s)
				}
			}
			plots = append(plots, pl)
		}
		lg.add("ring: first event")
		lg.add("band: 95% bounds")
		if edges {
			lg.add("dashed: nothing tested from here on")
		}
		err := ch.render(func(c draw.Canvas) {
			c = drawTitle(c, ch.Title)
			w := lg.width(c)
			pw := (c.Max.X - c.Min.X - w) / vg.Length(len(plots))
			for i, pl := range plots {
				drawPlot(draw.Crop(c, vg.Length(i)*pw, -(w+vg.Length(len(plots)-1-i)*pw), 0, 0), pl)
			}
			lg.l.Draw(draw.Crop(c, c.Max.X-c.Min.X-w+vg.Points(10), 0, 0, -vg.Points(6)))
		})
		if err == nil {
			err = ch.write(dir, true)
		}
		if err != nil {
			return nil, err
		}
		out[fam] = ch
	}
	return out, nil
}

func reverse(xs plotter.XYs) plotter.XYs {
	out := make(plotter.XYs, len(xs))
	for i, v := range xs {
		out[len(xs)-1-i] = v
	}
	return out
}

// envelopeAxis labels the size axis of family fam's chart: the size in
// its unit, or, for a family whose param is offset from its size (a
// clock's rate), what the size is.
func envelopeAxis(fam string, e results.Envelope) string {
	if e.Offset != 0 {
		return fmt.Sprintf("%s − %g: %ss gained per %s", e.Param, e.Offset, e.Unit, e.Unit)
	}
	return fmt.Sprintf("%s size / %s", fam, e.Unit)
}
