package report

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // png
	_ "gonum.org/v1/plot/vg/vgsvg" // svg

	"github.com/authvault/authvault/hack/soak/wire"
)

var (
	// sideColors are authvault's and client-go's, as the rotation demo
	// draws them; a third side would be grey.
	sideColors = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xe6, G: 0x55, B: 0x0d, A: 0xff}, color.RGBA{R: 0x70, G: 0x70, B: 0x70, A: 0xff}}
	// faultColors shade the faults' windows, a kind each in the order of
	// their names, translucent so that overlapping faults both show.
	faultColors = []color.Color{
		color.NRGBA{R: 0x99, G: 0x99, B: 0x99, A: 0x40}, color.NRGBA{R: 0xe4, G: 0x1a, B: 0x1c, A: 0x30},
		color.NRGBA{R: 0x37, G: 0x7e, B: 0xb8, A: 0x30}, color.NRGBA{R: 0x4d, G: 0xaf, B: 0x4a, A: 0x30},
		color.NRGBA{R: 0x98, G: 0x4e, B: 0xa3, A: 0x30}, color.NRGBA{R: 0xff, G: 0x7f, B: 0x00, A: 0x30},
		color.NRGBA{R: 0xa6, G: 0x56, B: 0x28, A: 0x30}, color.NRGBA{R: 0xf7, G: 0x81, B: 0xbf, A: 0x30},
		color.NRGBA{R: 0x1b, G: 0x9e, B: 0x77, A: 0x30}, color.NRGBA{R: 0xe6, G: 0xab, B: 0x02, A: 0x30},
	}
	unexplainedColor = color.RGBA{R: 0xd0, G: 0x00, B: 0x00, A: 0xff}
	// background is opaque, for pages with a dark theme.
	background = color.White
)

// The figure's geometry.
var (
	figureWidth = 10 * vg.Inch
	panelHeight = 2.2 * vg.Inch
	laneHeight  = vg.Points(70) // the failures' lanes and the time axis under them
	panelGap    = vg.Points(10)
	margin      = vg.Points(6)
)

// panels are the metrics the chart draws, a panel each.
var panels = []Metric{HeapInUse, Goroutines, FDs, Conns}

// WriteChart draws r into path, an SVG or a PNG by its extension: a panel
// per resource (heap in MiB, goroutines, descriptors, connections) with
// every side's line, over minutes since the start; the faults' windows
// shaded; under them, each side's failures as marks at their time, the
// unexplained ones in red.
func WriteChart(path string, r *Run) error {
	format := strings.TrimPrefix(filepath.Ext(path), ".")
	if format != "svg" && format != "png" {
		return fmt.Errorf("report: chart %s: want a .svg or .png file", path)
	}
	legend := chartLegend(r)
	height := 2*margin + legend.height(figureWidth-2*margin) + panelGap + vg.Length(len(panels))*(panelHeight+panelGap) + laneHeight
	c, err := draw.NewFormattedCanvas(figureWidth, height, format)
	if err != nil {
		return fmt.Errorf("report: chart %s: %w", path, err)
	}
	if err := drawChart(draw.New(c), r, legend); err != nil {
		return fmt.Errorf("report: chart %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: chart: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("report: chart %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: chart %s: %w", path, err)
	}
	return nil
}

// drawChart draws the legend and, under it, the panels and the failures'
// lanes, their time axes lined up.
func drawChart(c draw.Canvas, r *Run, legend *figureLegend) error {
	c.SetColor(background)
	c.Fill(c.Rectangle.Path())
	inner := draw.Crop(c, margin, -margin, margin, -margin)
	legend.draw(inner)
	top := inner.Max.Y - legend.height(inner.Max.X-inner.Min.X) - panelGap

	minutes := r.End.Sub(r.Start).Minutes()
	var plots []*plot.Plot
	var canvases []draw.Canvas
	for _, m := range panels {
		p, err := resourcePanel(r, m, minutes)
		if err != nil {
			return err
		}
		plots = append(plots, p)
		canvases = append(canvases, band(inner, top-panelHeight, top))
		top -= panelHeight + panelGap
	}
	lanes := failurePanel(r, minutes)
	plots = append(plots, lanes)
	canvases = append(canvases, band(inner, inner.Min.Y, top))
	alignX(plots, canvases)
	for i, p := range plots {
		p.Draw(canvases[i])
	}
	return nil
}

// band is the part of c between the heights bottom and top.
func band(c draw.Canvas, bottom, top vg.Length) draw.Canvas {
	return draw.Crop(c, 0, 0, bottom-c.Min.Y, top-c.Max.Y)
}

// alignX crops the plots' canvases so that their data areas span the same
// width, one above the other.
func alignX(plots []*plot.Plot, canvases []draw.Canvas) {
	var left, right vg.Length
	for i, p := range plots {
		c, data := canvases[i], p.DataCanvas(canvases[i])
		left, right = max(left, data.Min.X-c.Min.X), max(right, c.Max.X-data.Max.X)
	}
	for i, p := range plots {
		c, data := canvases[i], p.DataCanvas(canvases[i])
		canvases[i] = draw.Crop(c, left-(data.Min.X-c.Min.X), -(right - (c.Max.X - data.Max.X)), 0, 0)
	}
}

// sideColor is the color of the i-th side the report shows.
func sideColor(i int) color.Color { return sideColors[min(i, len(sideColors)-1)] }

// faultKinds are r's kinds of faults, sorted: the index of each is its
// color's.
func faultKinds(r *Run) []string {
	var kinds []string
	for _, f := range r.Faults {
		if !slices.Contains(kinds, f.Kind) {
			kinds = append(kinds, f.Kind)
		}
	}
	slices.Sort(kinds)
	return kinds
}

func faultColor(i int) color.Color { return faultColors[i%len(faultColors)] }

// resourcePanel is m over time, a line per side, on the faults' shades.
func resourcePanel(r *Run, m Metric, minutes float64) (*plot.Plot, error) {
	p := plot.New()
	p.BackgroundColor = nil // the figure's
	p.Y.Label.Text = m.String()
	scale := 1.0
	if m == HeapInUse {
		p.Y.Label.Text, scale = "heap in use (MiB)", 1<<20
	}
	p.X.Min, p.X.Max = 0, minutes
	p.X.Tick.Marker = minuteTicks{}
	p.Y.Min, p.Y.Max = 0, 1
	var lines []plot.Plotter
	for i, role := range roles(r) {
		samples := slices.SortedStableFunc(slices.Values(r.Sides[role].Samples), func(a, b wire.Sample) int { return a.At.Compare(b.At) })
		if len(samples) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(samples))
		for k, s := range samples {
			xys[k] = plotter.XY{X: s.At.Sub(r.Start).Minutes(), Y: m.of(s) / scale}
			p.Y.Max = max(p.Y.Max, xys[k].Y*1.05)
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.Color, line.Width = sideColor(i), vg.Points(1.2)
		lines = append(lines, line)
	}
	p.Add(plotter.NewGrid())
	kinds := faultKinds(r)
	for _, f := range r.Faults {
		p.Add(shade(f.Start.Sub(r.Start).Minutes(), f.End.Sub(r.Start).Minutes(), p.Y.Min, p.Y.Max, faultColor(slices.Index(kinds, f.Kind))))
	}
	// The first side, the one the soak gates, is drawn last: on top where
	// the lines meet.
	slices.Reverse(lines)
	p.Add(lines...)
	return p, nil
}

// shade is a window from and to, in minutes, over the height lo to hi.
func shade(from, to, lo, hi float64, col color.Color) *plotter.Polygon {
	// NewPolygon fails only on NaN or infinite points, which these are not.
	s, _ := plotter.NewPolygon(plotter.XYs{{X: from, Y: lo}, {X: to, Y: lo}, {X: to, Y: hi}, {X: from, Y: hi}})
	s.Color, s.LineStyle.Width = col, 0
	return s
}
