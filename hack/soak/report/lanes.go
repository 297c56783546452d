package report

import (
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The failures' marks: a ring in the side's color for an explained one, a
// red cross for one no fault explains.
var (
	explainedGlyph   = draw.GlyphStyle{Shape: draw.RingGlyph{}, Radius: vg.Points(2.5)}
	unexplainedGlyph = draw.GlyphStyle{Shape: draw.CrossGlyph{}, Radius: vg.Points(4), Color: unexplainedColor}
)

// failurePanel is the failures of each side over time, a row each, the
// first side on top, on the faults' shades; its time axis is the chart's.
func failurePanel(r *Run, minutes float64) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = nil
	p.X.Min, p.X.Max = 0, minutes
	p.X.Tick.Marker = minuteTicks{labels: true}
	p.X.Label.Text = "minutes since the start (both sides run at once)"
	rs := roles(r)
	p.Y.Min, p.Y.Max = -0.5, float64(len(rs))-0.5
	p.Y.Tick.Length = 0
	kinds := faultKinds(r)
	for _, f := range r.Faults {
		p.Add(shade(f.Start.Sub(r.Start).Minutes(), f.End.Sub(r.Start).Minutes(), p.Y.Min, p.Y.Max, faultColor(slices.Index(kinds, f.Kind))))
	}
	var ticks plot.ConstantTicks
	for i, role := range rs {
		y := float64(len(rs) - 1 - i)
		ticks = append(ticks, plot.Tick{Value: y, Label: role + " failures"})
		var ok, bad plotter.XYs
		for _, x := range r.Sides[role].Failures {
			xy := plotter.XY{X: x.At.Sub(r.Start).Minutes(), Y: y}
			if slices.ContainsFunc(r.Faults, func(f Fault) bool { return f.explains(x) }) {
				ok = append(ok, xy)
			} else {
				bad = append(bad, xy)
			}
		}
		// NewScatter fails only on NaN or infinite points, which these are not.
		if len(ok) > 0 {
			s, _ := plotter.NewScatter(ok)
			s.GlyphStyle = explainedGlyph
			s.GlyphStyle.Color = sideColor(i)
			p.Add(s)
		}
		if len(bad) > 0 {
			s, _ := plotter.NewScatter(bad)
			s.GlyphStyle = unexplainedGlyph
			p.Add(s)
		}
	}
	p.Y.Tick.Marker = ticks
	return p
}

// minuteTicks marks a time axis in minutes, "0 min", "10 min", ...: the
// plot's default ticks print "25.00" with no unit.
type minuteTicks struct {
	// labels false leaves the ticks bare: the panels share the time axis
	// of the lanes under them, which carries the labels.
	labels bool
}

// minuteSteps are the steps minuteTicks may take, in minutes; past the
// last, ten times a step.
var minuteSteps = []float64{0.25, 0.5, 1, 2, 5, 10, 15, 20, 30}

// maxMinuteTicks is how many ticks a time axis gets at most.
const maxMinuteTicks = 12

func (t minuteTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return nil
	}
	step := 0.0
	for scale := 1.0; step == 0; scale *= 10 {
		for _, s := range minuteSteps {
			if (hi-lo)/(s*scale) <= maxMinuteTicks {
				step = s * scale
				break
			}
		}
	}
	var ticks []plot.Tick
	for i := math.Ceil(lo / step); i*step <= hi; i++ {
		tick := plot.Tick{Value: i * step}
		if t.labels {
			tick.Label = strconv.FormatFloat(tick.Value, 'f', -1, 64) + " min"
		}
		ticks = append(ticks, tick)
	}
	return ticks
}

// chartLegend names what the panels draw, once for all of them.
func chartLegend(r *Run) *figureLegend {
	l := &figureLegend{}
	for i, role := range roles(r) {
		l.add(role, &plotter.Line{LineStyle: draw.LineStyle{Color: sideColor(i), Width: vg.Points(1.5)}})
	}
	for i, kind := range faultKinds(r) {
		l.add(kind, &plotter.Polygon{Color: faultColor(i)})
	}
	explained, unexplained := false, false
	for _, role := range roles(r) {
		for _, x := range r.Sides[role].Failures {
			if slices.ContainsFunc(r.Faults, func(f Fault) bool { return f.explains(x) }) {
				explained = true
			} else {
				unexplained = true
			}
		}
	}
	if explained {
		g := explainedGlyph
		g.Color = color.Black
		l.add("failure a fault explains", &plotter.Scatter{GlyphStyle: g})
	}
	if unexplained {
		l.add("unexplained failure", &plotter.Scatter{GlyphStyle: unexplainedGlyph})
	}
	return l
}
