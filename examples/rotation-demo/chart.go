package main

import (
	"fmt"
	"image/color"
	"math"
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

// The chart's latency axis, in milliseconds. It is drawn linear in the
// logarithm of a latency rather than on plot.LogScale, which centers the
// axis's label on the linear middle of the range, near its top.
const (
	yMin = 0.2
	yMax = 30_000
)

var (
	sideColors = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xe6, G: 0x55, B: 0x0d, A: 0xff}}
	downColor  = color.RGBA{R: 0xd0, G: 0xd0, B: 0xd0, A: 0xff}
	// background is opaque: on a dark page (GitHub's dark theme) a
	// transparent figure showed the page through the gaps between panels.
	background = color.White
)

// The figure's geometry.
var (
	figureWidth = 10 * vg.Inch
	panelHeight = 3.6 * vg.Inch
	laneHeight  = vg.Points(72) // the lanes of plugin runs and the time axis under them
	panelGap    = vg.Points(14)
	margin      = vg.Points(6)
)

// writeChart draws each scenario's request latency over time, both sides
// on one panel, into path (.svg or .png, by its extension).
func writeChart(path string, results []*result) error {
	format := strings.TrimPrefix(filepath.Ext(path), ".")
	if format != "svg" && format != "png" {
		return fmt.Errorf("chart %s: want a .svg or .png file", path)
	}
	legend := newFigureLegend(results)
	height := 2*margin + legend.height(figureWidth-2*margin) + vg.Length(len(results))*(panelHeight+panelGap)
	c, err := draw.NewFormattedCanvas(figureWidth, height, format)
	if err != nil {
		return err
	}
	if err := drawFigure(draw.New(c), results); err != nil {
		return err
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

// drawFigure draws the legend and, under it, a panel per scenario on c,
// all of whose time axes line up.
func drawFigure(c draw.Canvas, results []*result) error {
	c.SetColor(background)
	c.Fill(c.Rectangle.Path())
	inner := draw.Crop(c, margin, -margin, margin, -margin)
	legend := newFigureLegend(results)
	legend.draw(inner)
	body := draw.Crop(inner, 0, 0, 0, -(legend.height(inner.Max.X-inner.Min.X) + panelGap))

	var plots []*plot.Plot
	var canvases []draw.Canvas
	rowHeight := (body.Max.Y - body.Min.Y + panelGap) / vg.Length(len(results))
	for i, r := range results {
		latency, runs, err := panel(r)
		if err != nil {
			return err
		}
		top := body.Max.Y - vg.Length(i)*rowHeight
		area := draw.Crop(body, 0, 0, top-rowHeight+panelGap-body.Min.Y, top-body.Max.Y)
		plots = append(plots, latency, runs)
		canvases = append(canvases,
			draw.Crop(area, 0, 0, laneHeight, 0),
			draw.Crop(area, 0, 0, 0, laneHeight-(area.Max.Y-area.Min.Y)))
	}
	alignX(plots, canvases)
	for i, p := range plots {
		p.Draw(canvases[i])
	}
	return nil
}

// alignX crops each plot's canvas so that all their data areas span the
// same width, one above the other: the lanes' time axis is the latency
// panel's.
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

// newFigureLegend names what the panels draw, once for all of them.
func newFigureLegend(results []*result) *figureLegend {
	l := &figureLegend{}
	if len(results) == 0 {
		return l
	}
	var colors []color.Color
	for i, s := range results[0].sides {
		line := &plotter.Line{LineStyle: draw.LineStyle{Color: sideColors[i], Width: vg.Points(1.5)}}
		l.add(s.name, line)
		colors = append(colors, sideColors[i])
	}
	l.add(fmt.Sprintf("plugin run (%v each)", results[0].latency), runThumb{colors: colors, ok: true})
	failed, down := false, false
	for _, r := range results {
		down = down || r.downTo > r.downFrom
		for _, s := range r.sides {
			for _, run := range s.endpoint.Runs() {
				failed = failed || !run.ok
			}
		}
	}
	if failed {
		l.add("failed plugin run", runThumb{colors: colors})
	}
	if down {
		l.add("issuer down: plugin runs fail", &plotter.Polygon{Color: downColor})
	}
	stalled := false
	errs := map[outcome]bool{}
	for _, r := range results {
		for _, s := range r.sides {
			stalled = stalled || len(slowest(s.samples)) > 1
			for _, smp := range s.samples {
				errs[smp.err] = true
			}
		}
	}
	if stalled {
		l.add("no request started: every worker waiting (dotted)", dottedThumb(colors))
	}
	for _, kind := range []outcome{unauthorized, otherError} {
		if errs[kind] {
			l.add(errorNames[kind], errorThumb{colors: colors, glyph: errorGlyphs[kind]})
		}
	}
	return l
}

// panel is one scenario: the slowest request per bucket for each side
// over time, and under it the plugin's runs, a lane per side; the
// issuer's outage shaded across both.
func panel(r *result) (latency, runs *plot.Plot, err error) {
	latency, runs = plot.New(), plot.New()
	latency.BackgroundColor, runs.BackgroundColor = nil, nil // the figure's
	latency.Title.Text = panelTitle(r)
	latency.Title.Padding = vg.Points(4)
	latency.Y.Label.Text = "slowest request per 100 ms"
	latency.Y.Tick.Marker = latencyTicks{}
	latency.Y.Min, latency.Y.Max = math.Log10(yMin), math.Log10(yMax)
	latency.X.Tick.Marker = secondTicks{} // bare: the lanes' axis under it has the labels
	runs.X.Tick.Marker = secondTicks{labels: true}
	runs.X.Label.Text = "time since the scenario began (both sides run at once)"
	latency.Add(timeGrid{horizontal: true})
	runs.Add(timeGrid{})

	if r.downTo > r.downFrom {
		from, to := r.downFrom.Seconds(), r.downTo.Seconds()
		latency.Add(shade(from, to, latency.Y.Min, latency.Y.Max))
		runs.Add(shade(from, to, -0.5, float64(len(r.sides))-0.5))
	}
	var lanes runLanes
	for i, s := range r.sides {
		stretches := slowest(s.samples)
		for _, stretch := range stretches {
			for k := range stretch {
				stretch[k].Y = math.Log10(stretch[k].Y)
			}
		}
		for _, stall := range stalls(stretches) {
			line, err := stalledLine(stall, sideColors[i])
			if err != nil {
				return nil, nil, err
			}
			latency.Add(line)
		}
		for _, stretch := range stretches {
			line, points, err := plotter.NewLinePoints(stretch)
			if err != nil {
				return nil, nil, err
			}
			line.Color, line.Width = sideColors[i], vg.Points(1)
			latency.Add(line)
			if len(stretch) == 1 { // a line of one point draws nothing
				points.Color, points.Shape, points.Radius = sideColors[i], draw.CircleGlyph{}, vg.Points(1.5)
				latency.Add(points)
			}
		}
		for _, kind := range []outcome{unauthorized, otherError} {
			marks, err := errorMarks(s.samples, kind, sideColors[i])
			if err != nil {
				return nil, nil, err
			}
			if marks != nil {
				latency.Add(marks)
			}
			counts, err := errorCounts(s.samples, kind, sideColors[i])
			if err != nil {
				return nil, nil, err
			}
			if counts != nil {
				latency.Add(counts)
			}
		}
		lane := runLane{name: short(s.name) + " runs", color: sideColors[i]}
		for _, run := range s.endpoint.Runs() {
			lane.runs = append(lane.runs, span{from: run.start.Sub(r.origin).Seconds(), to: run.end.Sub(r.origin).Seconds(), ok: run.ok})
		}
		lanes = append(lanes, lane)
	}
	runs.Add(lanes)
	runs.Y.Tick.Marker = lanes.ticks()
	runs.Y.Tick.Length = 0
	// One time axis for both, from the scenario's start.
	latency.X.Min, runs.X.Min = 0, 0
	latency.X.Max = max(latency.X.Max, runs.X.Max)
	runs.X.Max = latency.X.Max
	return latency, runs, nil
}

// shade is the issuer's outage, from and to in seconds, over the height
// lo to hi of a plot.
func shade(from, to, lo, hi float64) *plotter.Polygon {
	// NewPolygon fails only on NaN or infinite points, which these are not.
	down, _ := plotter.NewPolygon(plotter.XYs{{X: from, Y: lo}, {X: to, Y: lo}, {X: to, Y: hi}, {X: from, Y: hi}})
	down.Color, down.LineStyle.Width = downColor, 0
	return down
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
