package main

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// runLanes draw the plugin's runs as spans of time, a row per side, on a
// strip of their own under the latency panel: drawn on the latency axis,
// at some height, a run read as a latency.
type runLanes []runLane

// runLane is one side's row.
type runLane struct {
	name  string
	color color.Color
	runs  []span
}

// span is one run, in seconds since the scenario began.
type span struct {
	from, to float64
	ok       bool // a failed run is drawn as an outline
}

// barHeight is how much of its row a run's bar fills.
const barHeight = 0.6

// minBarWidth keeps a run that took less than a pixel visible.
const minBarWidth = vg.Length(1.5)

// row is where lane i sits on the lane plot's Y axis: the first at the
// top, as in the legend.
func (l runLanes) row(i int) float64 { return float64(len(l) - 1 - i) }

// ticks name each row by its side.
func (l runLanes) ticks() plot.ConstantTicks {
	ticks := make(plot.ConstantTicks, len(l))
	for i, lane := range l {
		ticks[i] = plot.Tick{Value: l.row(i), Label: lane.name}
	}
	return ticks
}

func (l runLanes) Plot(c draw.Canvas, p *plot.Plot) {
	x, y := p.Transforms(&c)
	for i, lane := range l {
		bottom, top := y(l.row(i)-barHeight/2), y(l.row(i)+barHeight/2)
		for _, run := range lane.runs {
			left, right := x(run.from), x(run.to)
			right = max(right, left+minBarWidth)
			bar(&c, vg.Rectangle{Min: vg.Point{X: left, Y: bottom}, Max: vg.Point{X: right, Y: top}}, lane.color, run.ok)
		}
	}
}

// bar draws a run: filled, or outlined when it failed.
func bar(c *draw.Canvas, r vg.Rectangle, col color.Color, ok bool) {
	pts := []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}}
	if ok {
		c.FillPolygon(col, c.ClipPolygonXY(pts))
		return
	}
	c.StrokeLines(draw.LineStyle{Color: col, Width: vg.Points(1)}, c.ClipLinesXY(append(pts, pts[0]))...)
}

func (l runLanes) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = 0, 0
	for _, lane := range l {
		for _, run := range lane.runs {
			xmax = max(xmax, run.to)
		}
	}
	return xmin, xmax, -0.5, float64(len(l)) - 0.5
}

// runThumb is a legend's run: a bar of each side's color, one above the
// other, apart, filled or outlined.
type runThumb struct {
	colors []color.Color
	ok     bool
}

func (t runThumb) Thumbnail(c *draw.Canvas) {
	h := (c.Max.Y - c.Min.Y) / vg.Length(len(t.colors))
	for i, col := range t.colors {
		top := c.Max.Y - vg.Length(i)*h
		bar(c, vg.Rectangle{Min: vg.Point{X: c.Min.X, Y: top - h + 1}, Max: vg.Point{X: c.Max.X, Y: top - 1}}, col, t.ok)
	}
}
