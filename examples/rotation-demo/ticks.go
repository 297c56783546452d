package main

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
)

// secondTicks marks a time axis in whole seconds, "0 s", "10 s", ...: the
// plot's default ticks print a step of 2.5 as "25.00", which reads as a
// fraction and says no unit.
type secondTicks struct {
	// labels false leaves the ticks bare: the latency panel shares its
	// time axis with the lane under it, which carries the labels.
	labels bool
}

// steps are the steps secondTicks may take, in seconds, with the minor
// ticks between labels; past the last, ten times a step.
var steps = []struct{ major, minor float64 }{{1, 0.5}, {2, 1}, {5, 1}, {10, 2}, {15, 5}, {20, 5}, {30, 10}, {60, 10}}

// maxSecondTicks is how many labelled ticks a time axis gets at most.
const maxSecondTicks = 9

func (t secondTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return nil
	}
	step, minor := 0.0, 0.0
	for scale := 1.0; step == 0; scale *= 10 {
		for _, s := range steps {
			if (hi-lo)/(s.major*scale) < maxSecondTicks {
				step, minor = s.major*scale, s.minor*scale
				break
			}
		}
	}
	var ticks []plot.Tick
	perStep := math.Round(step / minor)
	for i := math.Ceil(lo / minor); i*minor <= hi; i++ {
		tick := plot.Tick{Value: i * minor}
		if math.Mod(i, perStep) == 0 {
			if t.labels {
				tick.Label = fmt.Sprintf("%d s", int(tick.Value))
			}
		}
		ticks = append(ticks, tick)
	}
	return ticks
}

// latencyTicks marks the latency axis, whose values are the logarithms
// of milliseconds, at every power of ten with its unit ("1 ms", "100 ms",
// "10 s"), and the steps between without labels.
type latencyTicks struct{}

func (latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for decade := math.Floor(lo); decade <= hi; decade++ {
		for i := 1.0; i < 10; i++ {
			v := decade + math.Log10(i)
			if v < lo || v > hi {
				continue
			}
			tick := plot.Tick{Value: v}
			if i == 1 {
				tick.Label = milliseconds(math.Pow10(int(decade)))
			}
			ticks = append(ticks, tick)
		}
	}
	return ticks
}

// milliseconds is ms, a power of ten, with the unit that reads best.
func milliseconds(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%g s", ms/1000)
	}
	return fmt.Sprintf("%g ms", ms)
}

// timeGrid draws a vertical line at every labelled second, and with
// horizontal a line at every labelled latency: plotter.Grid draws its lines
// at labelled ticks only, and the latency panel's time ticks are bare.
type timeGrid struct{ horizontal bool }

func (g timeGrid) Plot(c draw.Canvas, p *plot.Plot) {
	x, y := p.Transforms(&c)
	for _, tick := range (secondTicks{labels: true}).Ticks(p.X.Min, p.X.Max) {
		if !tick.IsMinor() {
			c.StrokeLine2(plotter.DefaultGridLineStyle, x(tick.Value), c.Min.Y, x(tick.Value), c.Max.Y)
		}
	}
	if !g.horizontal {
		return
	}
	for _, tick := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if !tick.IsMinor() {
			c.StrokeLine2(plotter.DefaultGridLineStyle, c.Min.X, y(tick.Value), c.Max.X, y(tick.Value))
		}
	}
}
