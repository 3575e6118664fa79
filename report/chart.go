package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// chartDir is where charts go inside the report dir.
const chartDir = "charts"

// chartDPI is the resolution of the PNGs: 10 in wide is 960 px.
const chartDPI = 96

// chart is one rendered figure: its files are charts/<Name>.png and,
// unless a report leaves them out, charts/<Name>.svg.
type chart struct {
	Name  string
	Title string
	// Read tells a reader how to read the chart, in a sentence or two.
	Read string
	// Notes say what the chart leaves out and which choices it made.
	Notes []string
	// PNG is the rendered image (at most maxColours colours), kept to
	// inline it in index.html.
	PNG           []byte
	Width, Height vg.Length
	// draw draws the figure on a canvas: kept to draw the SVG when the
	// chart is written.
	draw func(c draw.Canvas)
	// svg is set once the chart's SVG is written.
	svg bool
}

// render draws a chart with fn into its PNG. Any panic inside gonum/plot
// (it panics on, for example, a non-positive value on a log axis)
// becomes an error naming the chart, so bad input never takes the
// process down.
func (ch *chart) render(fn func(c draw.Canvas)) (err error) {
	defer ch.recoverPlot(&err)
	img := vgimg.NewWith(vgimg.UseWH(ch.Width, ch.Height), vgimg.UseDPI(chartDPI), vgimg.UseBackgroundColor(color.White))
	fn(draw.New(img))
	png, err := palettedPNG(img.Image())
	if err != nil {
		return fmt.Errorf("chart %s: png: %w", ch.Name, err)
	}
	ch.PNG, ch.draw = png, fn
	return nil
}

// write writes the chart's PNG under dir, and its SVG (drawn now) when
// svg is set.
func (ch *chart) write(dir string, svg bool) (err error) {
	defer ch.recoverPlot(&err)
	base := filepath.Join(dir, chartDir, ch.Name)
	if err := os.WriteFile(base+".png", ch.PNG, 0o644); err != nil {
		return fmt.Errorf("chart %s: %w", ch.Name, err)
	}
	if !svg {
		return nil
	}
	c := vgsvg.New(ch.Width, ch.Height)
	ch.draw(draw.New(c))
	var sv bytes.Buffer
	if _, err := c.WriteTo(&sv); err != nil {
		return fmt.Errorf("chart %s: svg: %w", ch.Name, err)
	}
	if err := os.WriteFile(base+".svg", sv.Bytes(), 0o644); err != nil {
		return fmt.Errorf("chart %s: %w", ch.Name, err)
	}
	ch.svg = true
	return nil
}

// recoverPlot turns a panic inside gonum/plot into *err, naming the
// chart.
func (ch *chart) recoverPlot(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(error); ok {
			*err = fmt.Errorf("chart %s: plotting failed: %w", ch.Name, e)
		} else {
			*err = fmt.Errorf("chart %s: plotting failed: %v", ch.Name, r)
		}
	}
}

// Text sizes, chosen to stay legible when a 960 px chart is shown
// scaled down in a browser.
const (
	titleSize  = 15
	labelSize  = 12.5
	tickSize   = 11
	legendSize = 11.5
	cellSize   = 9.5
)

func textStyle(size vg.Length, bold bool) text.Style {
	f := font.Font{Typeface: "Liberation", Variant: "Sans"}
	if bold {
		f.Weight = xfont.WeightBold
	}
	return text.Style{Color: color.Black, Font: font.From(f, size), Handler: plot.DefaultTextHandler}
}

// newPlot returns a plot with the report's fonts, title and axis labels.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle = textStyle(titleSize, true)
	p.Title.TextStyle.XAlign = draw.XCenter
	p.Title.TextStyle.YAlign = draw.YTop
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		xa, ya := a.Label.TextStyle.XAlign, a.Label.TextStyle.YAlign
		a.Label.TextStyle = textStyle(labelSize, false)
		a.Label.TextStyle.XAlign, a.Label.TextStyle.YAlign = xa, ya
		a.Label.Padding = vg.Points(4)
		xt, yt := a.Tick.Label.XAlign, a.Tick.Label.YAlign
		a.Tick.Label = textStyle(tickSize, false)
		a.Tick.Label.XAlign, a.Tick.Label.YAlign = xt, yt
	}
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	return p
}

// legend is a plot legend drawn outside the data area, to the right, so
// it never hides data however many backends there are.
type legend struct {
	l plot.Legend
	n int
}

func newLegend() *legend {
	l := plot.NewLegend()
	l.TextStyle = textStyle(legendSize, false)
	l.Top, l.Left = true, true
	l.ThumbnailWidth = vg.Points(26)
	l.Padding = vg.Points(3)
	return &legend{l: l}
}

func (lg *legend) add(name string, thumbs ...plot.Thumbnailer) {
	lg.l.Add(name, thumbs...)
	lg.n++
}

// width is the room the legend takes on the right of a canvas.
func (lg *legend) width(c draw.Canvas) vg.Length {
	if lg == nil || lg.n == 0 {
		return 0
	}
	r := lg.l.Rectangle(c)
	return r.Max.X - r.Min.X + vg.Points(16)
}

// drawWithLegend draws p's title across the whole of c, then p on the
// left and the legend in a column on its right, so that neither a long
// title nor many backends crowd the data.
func drawWithLegend(c draw.Canvas, p *plot.Plot, lg *legend) {
	if title := p.Title.Text; title != "" {
		c = drawTitle(c, title)
		p.Title.Text = "" // drawn already; restored for the next format
		defer func() { p.Title.Text = title }()
	}
	w := lg.width(c)
	drawPlot(draw.Crop(c, 0, -w, 0, 0), p)
	if w > 0 {
		lg.l.Draw(draw.Crop(c, c.Max.X-c.Min.X-w+vg.Points(10), 0, 0, -vg.Points(6)))
	}
}

// drawPlot draws p into c. On a logarithmic vertical axis gonum centres
// the axis label on the arithmetic mean of the range, which sits near
// the top of a log axis, and then shrinks the data area until the label
// fits: so such a label is drawn here instead, rotated and centred on
// the left edge, and the plot gets the rest of the canvas.
func drawPlot(c draw.Canvas, p *plot.Plot) {
	if _, isLog := p.Y.Scale.(plot.LogScale); !isLog || p.Y.Label.Text == "" {
		p.Draw(c)
		return
	}
	label := p.Y.Label.Text
	p.Y.Label.Text = ""
	defer func() { p.Y.Label.Text = label }()
	sty := p.Y.Label.TextStyle
	sty.Rotation = math.Pi / 2
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
	h := p.Y.Label.TextStyle.Height(label) + p.Y.Label.Padding
	top := c.Max.Y
	if p.Title.Text != "" {
		top -= p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
	}
	c.FillText(sty, vg.Point{X: c.Min.X, Y: (top + c.Min.Y) / 2}, label)
	p.Draw(draw.Crop(c, h, 0, 0, 0))
}

// drawTitle writes a figure title across the top of c and returns the
// canvas below it.
func drawTitle(c draw.Canvas, title string) draw.Canvas {
	sty := textStyle(titleSize, true)
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
	c.FillText(sty, vg.Point{X: c.Center().X, Y: c.Max.Y - vg.Points(4)}, title)
	return draw.Crop(c, 0, 0, 0, -(sty.Rectangle(title).Size().Y + vg.Points(12)))
}

// The palette starts with Okabe–Ito (distinguishable with the common
// colour vision deficiencies, yellow left out as too pale on white) and
// goes on with Kelly's colours of maximum contrast, so that the ~13
// backends of a full run each get a colour of their own; past the eighth
// they are also dashed, and each has its own glyph. Grey is kept for
// the control.
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{213, 94, 0, 255},    // vermillion
	color.RGBA{0, 158, 115, 255},   // bluish green
	color.RGBA{204, 121, 167, 255}, // reddish purple
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{0, 0, 0, 255},       // black
	color.RGBA{136, 45, 23, 255},   // reddish brown
	color.RGBA{141, 182, 0, 255},   // yellow green
	color.RGBA{96, 78, 151, 255},   // violet
	color.RGBA{190, 0, 50, 255},    // crimson
	color.RGBA{0, 128, 128, 255},   // teal
	color.RGBA{249, 147, 121, 255}, // salmon
	color.RGBA{85, 107, 47, 255},   // olive
	color.RGBA{161, 202, 241, 255}, // light blue
	color.RGBA{194, 178, 128, 255}, // buff
}

// controlColor is the control's grey, in no other series.
var controlColor = color.RGBA{128, 128, 128, 255}

var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{},
	draw.RingGlyph{}, draw.BoxGlyph{}, draw.PlusGlyph{},
}

// seriesStyle is how one backend is drawn in every chart, so a backend
// keeps its colour from chart to chart.
type seriesStyle struct {
	line  draw.LineStyle
	glyph draw.GlyphStyle
}

// styleFor is the style of the i-th real lock. Past the palette the
// colours would repeat, so the line pattern changes with every lap.
func styleFor(i int) seriesStyle {
	c := palette[i%len(palette)]
	s := seriesStyle{
		line:  draw.LineStyle{Color: c, Width: vg.Points(2)},
		glyph: draw.GlyphStyle{Color: c, Radius: vg.Points(3.5), Shape: glyphs[i%len(glyphs)]},
	}
	switch lap := i / 8; {
	case lap == 1:
		s.line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	case lap >= 2:
		s.line.Dashes = []vg.Length{vg.Points(2), vg.Points(2), vg.Points(6), vg.Points(2)}
	}
	return s
}

// controlStyle is the control's: grey, dotted, crosses.
func controlStyle() seriesStyle {
	return seriesStyle{
		line:  draw.LineStyle{Color: controlColor, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(1.5), vg.Points(2.5)}},
		glyph: draw.GlyphStyle{Color: controlColor, Radius: vg.Points(4), Shape: draw.CrossGlyph{}},
	}
}

// backendStyle returns the style of a backend by its place among the
// run's real locks; the control has its own.
func (ds *dataset) backendStyle(backend string) seriesStyle {
	if ds.isControl(backend) {
		return controlStyle()
	}
	real := ds.realBackends()
	if i := slices.Index(real, backend); i >= 0 {
		return styleFor(i)
	}
	return styleFor(len(real))
}

// logRange returns a log axis range covering the positive values of vs
// with whole decades at both ends, and whether any value was positive.
func logRange(vs ...float64) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if v > 0 && !math.IsInf(v, 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 0) {
		return 1, 10, false
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi, true
}

// spansDecades reports whether the positive values of vs differ by more
// than a factor of 20, the point past which a linear axis squashes the
// small ones flat.
func spansDecades(vs ...float64) bool {
	lo, hi := math.Inf(1), 0.0
	for _, v := range vs {
		if v > 0 && !math.IsInf(v, 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	return hi > 0 && hi/lo > 20
}

// logTicks labels each decade with fmtLabel and marks 2..9 as minor
// ticks.
func logTicks(fmtLabel func(float64) string) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ticks []plot.Tick
		for _, t := range (plot.LogTicks{Prec: -1}).Ticks(lo, hi) {
			if t.Label != "" {
				t.Label = fmtLabel(t.Value)
			}
			ticks = append(ticks, t)
		}
		return ticks
	})
}

// linearTicks relabels gonum's default ticks with fmtLabel.
func linearTicks(fmtLabel func(float64) string) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		ticks := plot.DefaultTicks{}.Ticks(lo, hi)
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = fmtLabel(ticks[i].Value)
			}
		}
		return ticks
	})
}

// rateAxis sets a throughput axis: log when the values span decades,
// else linear from zero. It returns whether the axis is logarithmic.
func rateAxis(a *plot.Axis, vs []float64) bool {
	if spansDecades(vs...) {
		a.Scale = plot.LogScale{}
		a.Min, a.Max, _ = logRange(vs...)
		a.Tick.Marker = logTicks(fmtRate)
		return true
	}
	hi := 0.0
	for _, v := range vs {
		if v > hi && !math.IsInf(v, 0) {
			hi = v
		}
	}
	a.Min, a.Max = 0, math.Max(hi*1.1, 1)
	a.Tick.Marker = linearTicks(fmtRate)
	return false
}

// clamp keeps v within the axis range, so a transform on a log axis
// never sees a non-positive value.
func clamp(a plot.Axis, v float64) float64 { return math.Min(math.Max(v, a.Min), a.Max) }

// segments is a plotter of vertical segments in data coordinates (the
// spread of trials, the p50–p999 span), clamped to the axes.
type segments struct {
	xs, lo, hi []float64
	style      draw.LineStyle
	cap        vg.Length
}

// Plot implements plot.Plotter.
func (s *segments) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i := range s.xs {
		x := trX(s.xs[i])
		y0, y1 := trY(clamp(p.Y, s.lo[i])), trY(clamp(p.Y, s.hi[i]))
		c.StrokeLine2(s.style, x, y0, x, y1)
		if s.cap > 0 {
			c.StrokeLine2(s.style, x-s.cap, y0, x+s.cap, y0)
			c.StrokeLine2(s.style, x-s.cap, y1, x+s.cap, y1)
		}
	}
}

// Thumbnail implements plot.Thumbnailer.
func (s *segments) Thumbnail(c *draw.Canvas) {
	x := (c.Min.X + c.Max.X) / 2
	c.StrokeLine2(s.style, x, c.Min.Y, x, c.Max.Y)
}

// swatch is a filled legend thumbnail.
type swatch struct{ fill, edge color.Color }

// Thumbnail implements plot.Thumbnailer.
func (s swatch) Thumbnail(c *draw.Canvas) {
	r := vg.Rectangle{Min: vg.Point{X: c.Min.X + 2, Y: c.Min.Y}, Max: vg.Point{X: c.Max.X - 2, Y: c.Max.Y}}
	c.SetColor(s.fill)
	c.Fill(r.Path())
	if s.edge != nil {
		c.SetLineStyle(draw.LineStyle{Color: s.edge, Width: vg.Points(0.7)})
		c.Stroke(r.Path())
	}
}

// glyphThumb is a legend thumbnail of one glyph.
type glyphThumb struct{ g draw.GlyphStyle }

// Thumbnail implements plot.Thumbnailer.
func (t glyphThumb) Thumbnail(c *draw.Canvas) { c.DrawGlyphNoClip(t.g, c.Center()) }

// lineThumb is a legend thumbnail of a line with its glyph.
type lineThumb struct{ s seriesStyle }

// Thumbnail implements plot.Thumbnailer.
func (t lineThumb) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(t.s.line, c.Min.X, y, c.Max.X, y)
	c.DrawGlyphNoClip(t.s.glyph, c.Center())
}

// glyphsAt draws glyphs at data points, clamped to the axes (used to put
// zero values at the floor of a log axis, where they are marked as such).
type glyphsAt struct {
	xs, ys []float64
	g      draw.GlyphStyle
}

// Plot implements plot.Plotter.
func (s *glyphsAt) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i := range s.xs {
		c.DrawGlyphNoClip(s.g, vg.Point{X: trX(clamp(p.X, s.xs[i])), Y: trY(clamp(p.Y, s.ys[i]))})
	}
}

// polyline draws a line through data points in data coordinates.
type polyline struct {
	xs, ys []float64
	style  draw.LineStyle
}

// Plot implements plot.Plotter.
func (l *polyline) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	pts := make([]vg.Point, len(l.xs))
	for i := range l.xs {
		pts[i] = vg.Point{X: trX(clamp(p.X, l.xs[i])), Y: trY(clamp(p.Y, l.ys[i]))}
	}
	if len(pts) > 1 {
		c.StrokeLines(l.style, c.ClipLinesXY(pts)...)
	}
}

// fitNominalX rotates the tick labels of a nominal x axis when the
// widest would not fit its slot of the given axis width, so that many or
// long backend names never overlap.
func fitNominalX(p *plot.Plot, names []string, axisWidth vg.Length) {
	if len(names) == 0 {
		return
	}
	widest := vg.Length(0)
	for _, n := range names {
		widest = max(widest, p.X.Tick.Label.Width(n))
	}
	if widest+vg.Points(8) > axisWidth/vg.Length(len(names)) {
		p.X.Tick.Label.Rotation = math.Pi / 6
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YTop
	}
}
