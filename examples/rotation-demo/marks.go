package main

import (
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A caller-visible error is drawn where its request is on the latency
// panel (its start, its duration), in its side's color, a glyph per kind:
// the lines alone showed the same spike for both sides in the revocation
// scenario, where what differs is who got the 401s.
var errorGlyphs = map[outcome]draw.GlyphDrawer{
	unauthorized: errorGlyph{cross: true},
	otherError:   errorGlyph{},
}

// errorGlyph is a cross or a triangle, outlined: gonum's own glyphs are
// drawn in lines of half a point, lost on a line of a point and a half.
type errorGlyph struct{ cross bool }

// errorStroke is the width of an error's glyph.
const errorStroke = vg.Length(1.5)

func (g errorGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: errorStroke})
	r := sty.Radius
	var p vg.Path
	if g.cross {
		p.Move(vg.Point{X: pt.X - r, Y: pt.Y - r})
		p.Line(vg.Point{X: pt.X + r, Y: pt.Y + r})
		p.Move(vg.Point{X: pt.X - r, Y: pt.Y + r})
		p.Line(vg.Point{X: pt.X + r, Y: pt.Y - r})
	} else {
		p.Move(vg.Point{X: pt.X, Y: pt.Y + r})
		p.Line(vg.Point{X: pt.X + r, Y: pt.Y - r})
		p.Line(vg.Point{X: pt.X - r, Y: pt.Y - r})
		p.Close()
	}
	c.Stroke(p)
}

// errorNames are the legend's words for each kind.
var errorNames = map[outcome]string{
	unauthorized: "a 401 a caller got",
	otherError:   "another error a caller got",
}

const errorRadius = vg.Length(4)

// errorMarks are a side's requests that ended in err, at their start in
// seconds and their duration on the latency axis (log10 ms); nil when
// there are none.
func errorMarks(samples []sample, err outcome, col color.Color) (*plotter.Scatter, error) {
	var xys plotter.XYs
	for _, s := range samples {
		if s.err == err {
			xys = append(xys, plotter.XY{X: s.at.Seconds(), Y: math.Log10(max(ms(s.took), yMin))})
		}
	}
	if len(xys) == 0 {
		return nil, nil
	}
	sc, e := plotter.NewScatter(xys)
	if e != nil {
		return nil, e
	}
	sc.Shape, sc.Color, sc.Radius = errorGlyphs[err], col, errorRadius
	return sc, nil
}

// errorCountNouns name what errorCounts count.
var errorCountNouns = map[outcome]string{unauthorized: "401s", otherError: "errors"}

// errorCluster is how far apart errors of one kind may start and still
// be counted together: those of one re-login or one outage, which
// otherwise draw one glyph over another.
const errorCluster = time.Second

// errorCounts label each cluster of more than one error of a kind with
// its count, above its highest glyph; nil when there is none.
func errorCounts(samples []sample, err outcome, col color.Color) (*plotter.Labels, error) {
	var at plotter.XYs
	var labels []string
	var first time.Duration
	n := 0
	flush := func() {
		if n > 1 {
			labels = append(labels, fmt.Sprintf("%d %s", n, errorCountNouns[err]))
		} else if n == 1 {
			at = at[:len(at)-1]
		}
		n = 0
	}
	for _, s := range samples { // sorted by start
		if s.err != err {
			continue
		}
		y := math.Log10(max(ms(s.took), yMin))
		if n > 0 && s.at-first <= errorCluster {
			n++
			at[len(at)-1].Y = max(at[len(at)-1].Y, y)
			continue
		}
		flush()
		first, n = s.at, 1
		at = append(at, plotter.XY{X: s.at.Seconds(), Y: y})
	}
	flush()
	if len(labels) == 0 {
		return nil, nil
	}
	l, e := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: labels})
	if e != nil {
		return nil, e
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Color = col
		l.TextStyle[i].XAlign = text.XCenter
	}
	l.Offset = vg.Point{Y: errorRadius + 2}
	return l, nil
}

// errorThumb is a legend's error: its glyph in each side's color, side by
// side.
type errorThumb struct {
	colors []color.Color
	glyph  draw.GlyphDrawer
}

func (t errorThumb) Thumbnail(c *draw.Canvas) {
	w := (c.Max.X - c.Min.X) / vg.Length(len(t.colors))
	y := (c.Min.Y + c.Max.Y) / 2
	for i, col := range t.colors {
		x := c.Min.X + (vg.Length(i)+0.5)*w
		c.DrawGlyph(draw.GlyphStyle{Color: col, Radius: errorRadius, Shape: t.glyph}, vg.Point{X: x, Y: y})
	}
}

// A stretch of buckets in which no request started is a time when every
// worker was inside a request that began before it: the slowest request
// of the bucket before the gap, the workload stalled on it. The line is
// carried across at that request's height, dotted.
var stalledDashes = []vg.Length{vg.Points(1), vg.Points(2.5)}

// stalls are the dotted lines across the gaps between stretches (see
// slowest), each from the last point before a gap to where the next
// stretch begins, at the height of that last point.
func stalls(stretches []plotter.XYs) []plotter.XYs {
	var lines []plotter.XYs
	for i := 1; i < len(stretches); i++ {
		last, next := stretches[i-1][len(stretches[i-1])-1], stretches[i][0]
		lines = append(lines, plotter.XYs{last, {X: next.X, Y: last.Y}})
	}
	return lines
}

// stalledLine is a stall's dotted line in a side's color.
func stalledLine(xys plotter.XYs, col color.Color) (*plotter.Line, error) {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	l.LineStyle = draw.LineStyle{Color: col, Width: vg.Points(1), Dashes: stalledDashes}
	return l, nil
}

// dottedThumb is the legend's stall: a dotted line in each side's color.
type dottedThumb []color.Color

func (t dottedThumb) Thumbnail(c *draw.Canvas) {
	h := (c.Max.Y - c.Min.Y) / vg.Length(len(t)+1)
	for i, col := range t {
		y := c.Max.Y - vg.Length(i+1)*h
		c.StrokeLine2(draw.LineStyle{Color: col, Width: vg.Points(1), Dashes: stalledDashes}, c.Min.X, y, c.Max.X, y)
	}
}
