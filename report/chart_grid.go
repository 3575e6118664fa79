package report

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// gridCell is one coloured cell of a grid chart with its lines of text.
type gridCell struct {
	fill  color.Color
	lines []cellLine
	// dim greys the text (a combination not run).
	dim bool
}

type cellLine struct {
	text string
	bold bool
}

// cellGrid draws a table of coloured cells with text in data
// coordinates: column i, row j is centred on (i, j).
type cellGrid struct {
	cells [][]gridCell // [row][col]
}

var cellEdge = color.RGBA{255, 255, 255, 255}

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
			c.SetColor(cell.fill)
			c.Fill(r.Path())
			c.SetLineStyle(draw.LineStyle{Color: cellEdge, Width: vg.Points(2)})
			c.Stroke(r.Path())
			lh := regular.Rectangle("Xg").Size().Y
			y := (r.Min.Y+r.Max.Y)/2 + lh*vg.Length(len(cell.lines))/2
			for _, l := range cell.lines {
				sty := regular
				if l.bold {
					sty = bold
				}
				if cell.dim {
					sty.Color = color.Gray{Y: 110}
				}
				sty.XAlign, sty.YAlign = text.XCenter, text.YTop
				c.FillText(sty, vg.Point{X: (r.Min.X + r.Max.X) / 2, Y: y}, l.text)
				y -= lh
			}
		}
	}
}

// gridPanel is one grid of a grid chart: its title, rows (top first)
// and cells.
type gridPanel struct {
	title string
	rows  []string
	cells [][]gridCell // [row][col], rows top first
}

// gridChart draws panels of rows × columns stacked, sharing the column
// names, with a legend on the right.
func gridChart(ch *chart, cols []string, panels []gridPanel, lg *legend, ylabel string) (*chart, error) {
	return gridChartW(ch, cols, panels, lg, ylabel, vg.Inch*1.55, 2.7*vg.Inch)
}

// gridChartW is gridChart with columns colW wide and room legendW wide
// for the legend: a figure meant to be read at the width of a page uses
// narrow columns of short cell lines and a legend of swatches only.
func gridChartW(ch *chart, cols []string, panels []gridPanel, lg *legend, ylabel string, colW, legendW vg.Length) (*chart, error) {
	lines := 2
	for _, pn := range panels {
		for _, row := range pn.cells {
			for _, cell := range row {
				lines = max(lines, len(cell.lines))
			}
		}
	}
	rowH := vg.Length(lines)*vg.Points(cellSize*1.25) + vg.Points(10)
	ch.Width = max(10*vg.Inch, vg.Length(len(cols))*colW+2*vg.Inch+legendW)
	ch.Height = vg.Inch * 0.55
	var plots []*plot.Plot
	var heights []vg.Length
	for k, pn := range panels {
		xlabel := ""
		if k == len(panels)-1 {
			xlabel = "backend"
		}
		p := newPlot(pn.title, xlabel, ylabel)
		p.Title.TextStyle = textStyle(labelSize+0.5, true)
		p.Title.TextStyle.XAlign, p.Title.TextStyle.YAlign = draw.XCenter, draw.YTop
		p.NominalX(cols...)
		fitNominalX(p, cols, vg.Length(len(cols))*colW)
		p.NominalY(reversed(pn.rows)...)
		p.X.Padding, p.Y.Padding = 0, 0
		p.X.Min, p.X.Max = -0.5, float64(len(cols))-0.5
		p.Y.Min, p.Y.Max = -0.5, float64(len(pn.rows))-0.5
		bottomUp := make([][]gridCell, len(pn.cells))
		for j := range pn.cells {
			bottomUp[len(pn.cells)-1-j] = pn.cells[j]
		}
		p.Add(&cellGrid{cells: bottomUp})
		plots = append(plots, p)
		h := vg.Length(len(pn.rows))*rowH + vg.Inch*1.05
		if p.X.Tick.Label.Rotation != 0 { // slanted names hang below the axis
			widest := vg.Length(0)
			for _, name := range cols {
				widest = max(widest, p.X.Tick.Label.Width(name))
			}
			h += widest * vg.Length(math.Sin(p.X.Tick.Label.Rotation))
		}
		heights = append(heights, h)
		ch.Height += h
	}
	// Room for the legend beside a grid of few rows, left blank below
	// the grid.
	var spare vg.Length
	if least := 4.5 * vg.Inch; ch.Height < least {
		spare = least - ch.Height
		ch.Height = least
	}
	return ch, ch.render(func(c draw.Canvas) {
		c = drawTitle(c, ch.Title)
		w := lg.width(c)
		lg.l.Draw(draw.Crop(c, c.Max.X-c.Min.X-w+vg.Points(10), 0, 0, -vg.Points(30)))
		body := draw.Crop(c, 0, -w, spare, 0)
		var total vg.Length
		for _, h := range heights {
			total += h
		}
		top := body.Max.Y
		full := body.Max.Y - body.Min.Y
		for k, p := range plots {
			h := full * heights[k] / total
			drawPlot(draw.Canvas{Canvas: body.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: body.Min.X, Y: top - h},
				Max: vg.Point{X: body.Max.X, Y: top}}}, p)
			top -= h
		}
	})
}
