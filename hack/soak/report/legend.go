package report

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// figureLegend is the chart's one legend, across its top: every panel
// draws the same things in the same colors.
type figureLegend struct {
	entries []legendEntry
}

type legendEntry struct {
	text  string
	thumb plot.Thumbnailer
}

// The legend's geometry.
var (
	legendFont  = font.From(plot.DefaultFont, 10)
	legendThumb = vg.Points(22) // a thumbnail's width
	legendGap   = vg.Points(16) // between entries
)

func (l *figureLegend) add(text string, thumb plot.Thumbnailer) {
	l.entries = append(l.entries, legendEntry{text, thumb})
}

func (l *figureLegend) style() text.Style {
	return text.Style{Color: color.Black, Font: legendFont, Handler: plot.DefaultTextHandler}
}

// width is what entry e takes on a row.
func (l *figureLegend) width(e legendEntry) vg.Length {
	return legendThumb + l.style().Width(" "+e.text)
}

// rows lays the entries out left to right, wrapping at width.
func (l *figureLegend) rows(width vg.Length) [][]legendEntry {
	var rows [][]legendEntry
	var row []legendEntry
	x := vg.Length(0)
	for _, e := range l.entries {
		w := l.width(e)
		if len(row) > 0 && x+w > width {
			rows, row, x = append(rows, row), nil, 0
		}
		row = append(row, e)
		x += w + legendGap
	}
	if len(row) > 0 {
		rows = append(rows, row)
	}
	return rows
}

func (l *figureLegend) lineHeight() vg.Length { return l.style().Height("Xg") * 1.4 }

// height is what the legend takes at width.
func (l *figureLegend) height(width vg.Length) vg.Length {
	return vg.Length(len(l.rows(width))) * l.lineHeight()
}

// draw draws the legend at the top of c, each row centered.
func (l *figureLegend) draw(c draw.Canvas) {
	sty := l.style()
	lh, textH := l.lineHeight(), sty.Height("Xg")
	top := c.Max.Y
	for _, row := range l.rows(c.Max.X - c.Min.X) {
		w := -legendGap
		for _, e := range row {
			w += l.width(e) + legendGap
		}
		x := c.Min.X + (c.Max.X-c.Min.X-w)/2
		y := top - lh + (lh-textH)/2 // the text's bottom
		for _, e := range row {
			thumb := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: x, Y: y}, Max: vg.Point{X: x + legendThumb, Y: y + textH}}}
			e.thumb.Thumbnail(&thumb)
			c.FillText(sty, vg.Point{X: x + legendThumb + sty.Width(" "), Y: y + sty.FontExtents().Descent}, e.text)
			x += l.width(e) + legendGap
		}
		top -= lh
	}
}
