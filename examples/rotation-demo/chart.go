package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // png
	_ "gonum.org/v1/plot/vg/vgsvg" // svg
)

// bucket is the chart's time resolution: each point is the slowest request
// that started in one bucket, so that a stall shows however few requests
// it caught.
const bucket = 100 * time.Millisecond

// The chart's latency axis, in milliseconds, and where the plugin runs are
// drawn: below every request, one row per side.
const (
	yMin = 0.2
	yMax = 30_000
)

var (
	sideColors = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xe6, G: 0x55, B: 0x0d, A: 0xff}}
	runRows    = []float64{1, 0.4}
	downColor  = color.RGBA{R: 0xd0, G: 0xd0, B: 0xd0, A: 0xff}
)

// writeChart draws each scenario's request latency over time, both sides
// on one panel, into path (.svg or .png, by its extension).
func writeChart(path string, results []*result) error {
	format := strings.TrimPrefix(filepath.Ext(path), ".")
	if format != "svg" && format != "png" {
		return fmt.Errorf("chart %s: want a .svg or .png file", path)
	}
	plots := make([][]*plot.Plot, len(results))
	for i, r := range results {
		p, err := panel(r)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{p}
	}
	c, err := draw.NewFormattedCanvas(10*vg.Inch, vg.Length(len(results))*4*vg.Inch, format)
	if err != nil {
		return err
	}
	tiles := draw.Tiles{Rows: len(results), Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align(plots, tiles, draw.New(c))
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// panel is one scenario: the slowest request per bucket for each side, the
// plugin runs as bars (a failed run dashed), the issuer's outage shaded.
func panel(r *result) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = r.scenario.name + ": " + r.scenario.title
	p.X.Label.Text = "seconds since the scenario began (both sides run at once)"
	p.Y.Label.Text = "slowest request per 100 ms (ms)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = yMin, yMax
	p.X.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())

	if r.downTo > r.downFrom {
		from, to := r.downFrom.Seconds(), r.downTo.Seconds()
		down, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: yMin}, {X: to, Y: yMin}, {X: to, Y: yMax}, {X: from, Y: yMax}})
		if err != nil {
			return nil, err
		}
		down.Color, down.LineStyle.Width = downColor, 0
		p.Add(down)
		p.Legend.Add("issuer down: plugin runs fail", down)
	}
	for i, s := range r.sides {
		for j, stretch := range slowest(s.samples) {
			line, points, err := plotter.NewLinePoints(stretch)
			if err != nil {
				return nil, err
			}
			line.Color, line.Width = sideColors[i], vg.Points(1)
			p.Add(line)
			if len(stretch) == 1 { // a line of one point draws nothing
				points.Color, points.Shape, points.Radius = sideColors[i], draw.CircleGlyph{}, vg.Points(1.5)
				p.Add(points)
			}
			if j == 0 {
				p.Legend.Add(s.name, line)
			}
		}
		var legend *plotter.Line
		for _, run := range s.endpoint.Runs() {
			y := runRows[i]
			bar, err := plotter.NewLine(plotter.XYs{{X: run.start.Sub(r.origin).Seconds(), Y: y}, {X: run.end.Sub(r.origin).Seconds(), Y: y}})
			if err != nil {
				return nil, err
			}
			bar.Color, bar.Width = sideColors[i], vg.Points(5)
			if !run.ok {
				bar.Width, bar.Dashes = vg.Points(3), []vg.Length{vg.Points(2), vg.Points(2)}
			}
			p.Add(bar)
			if legend == nil && run.ok {
				legend = bar
			}
		}
		if legend != nil {
			p.Legend.Add(fmt.Sprintf("%s plugin runs, %v each (dashed: failed)", short(s.name), r.latency), legend)
		}
	}
	return p, nil
}

// slowest is the longest request of each bucket, by start, in
// milliseconds, in stretches of consecutive buckets: a bucket in which no
// request started (every worker was waiting) breaks the line rather than
// being drawn over. samples are sorted by start.
func slowest(samples []sample) []plotter.XYs {
	var stretches []plotter.XYs
	var xys plotter.XYs
	last := time.Duration(-2)
	for i := 0; i < len(samples); {
		b := samples[i].at / bucket
		top := samples[i].took
		for i++; i < len(samples) && samples[i].at/bucket == b; i++ {
			top = max(top, samples[i].took)
		}
		if b != last+1 && len(xys) > 0 {
			stretches, xys = append(stretches, xys), nil
		}
		last = b
		xys = append(xys, plotter.XY{X: (b * bucket).Seconds(), Y: max(float64(top)/float64(time.Millisecond), yMin)})
	}
	if len(xys) > 0 {
		stretches = append(stretches, xys)
	}
	return stretches
}
