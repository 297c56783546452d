package main

import (
	"fmt"
	"html"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeResult is a scenario of d whose sides' requests take about 20 ms,
// with a stall of a second every 10 s from 5 s on client-go's side, in
// which no other request starts, and runs of the plugin on each side as
// given (a zero end: a failed run of 1 s).
func fakeResult(name string, d time.Duration, down [2]time.Duration, runs ...[]pluginRun) *result {
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	r := &result{scenario: &scenario{name: name, title: "a fake " + name}, origin: origin, latency: time.Second,
		downFrom: down[0], downTo: down[1]}
	for i, sideName := range []string{"authvault", "client-go exec plugin"} {
		s := &side{name: sideName, endpoint: &endpoint{}}
		for at := time.Duration(0); at < d; at += 20 * time.Millisecond {
			took := time.Duration(5+rng.IntN(40)) * time.Millisecond
			stall := i == 1 && at%(10*time.Second) == 5*time.Second
			if stall {
				took = time.Second
			}
			s.samples = append(s.samples, sample{at: at, took: took})
			if stall {
				at += took
			}
		}
		for _, run := range runs[i] {
			s.endpoint.record(pluginRun{start: origin.Add(run.start.Sub(time.Time{})), end: origin.Add(run.end.Sub(time.Time{})), ok: run.ok})
		}
		s.figures = summarize(s.samples, s.endpoint.Runs())
		r.sides = append(r.sides, s)
	}
	return r
}

// withErrors makes the requests of side i that start at the given times
// (on fakeResult's 20-ms grid) end in err.
func withErrors(r *result, i int, err outcome, at ...time.Duration) *result {
	s := r.sides[i]
	for k := range s.samples {
		if slices.Contains(at, s.samples[k].at) {
			s.samples[k].err = err
		}
	}
	s.figures = summarize(s.samples, s.endpoint.Runs())
	return r
}

// run is a plugin run from from to to seconds, on fakeResult's clock.
func run(from, to float64, ok bool) pluginRun {
	at := func(s float64) time.Time { return time.Time{}.Add(time.Duration(s * float64(time.Second))) }
	return pluginRun{start: at(from), end: at(to), ok: ok}
}

// fakeResults are the demo's three scenarios: 24 s, 45 s, and an outage
// in which runs fail, of 52 s (whose default ticks read 0.00, 25.00,
// 50.00).
func fakeResults() []*result {
	ms := time.Millisecond
	return []*result{
		withErrors(fakeResult("revocation", 24*time.Second, [2]time.Duration{},
			[]pluginRun{run(0, 1, true), run(11, 12, true)}, []pluginRun{run(0, 1, true), run(11.2, 12.2, true)}),
			1, unauthorized, 11200*ms, 11220*ms, 11240*ms),
		fakeResult("expiry", 45*time.Second, [2]time.Duration{},
			[]pluginRun{run(0, 1, true), run(10, 11, true), run(20, 21, true)}, []pluginRun{run(0, 1, true), run(21, 22, true)}),
		withErrors(fakeResult("outage", 52*time.Second, [2]time.Duration{35 * time.Second, 50 * time.Second},
			[]pluginRun{run(0, 1, true), run(30, 31, true), run(40, 41, false)},
			[]pluginRun{run(0, 1, true), run(40, 41, false), run(42, 43, false), run(50, 51, true)}),
			1, otherError, 40*time.Second, 42*time.Second),
	}
}

// svgMark is a path of the chart's SVG, in the SVG's user units with y
// up (gonum's vgsvg flips the whole drawing), and its style.
type svgMark struct {
	pts   [][2]float64
	style string
}

// svgText is a string drawn, at its baseline's start, y up.
type svgText struct {
	x, y float64
	text string
}

var (
	svgViewBox = regexp.MustCompile(`viewBox="0 0 ([\d.]+) ([\d.]+)"`)
	svgPath    = regexp.MustCompile(`<path d="([^"]*)" style="([^"]*)"`)
	svgPoint   = regexp.MustCompile(`[ML]([-\d.e]+),([-\d.e]+)`)
	svgTextRe  = regexp.MustCompile(`(?s)<text x="([-\d.e]+)" y="([-\d.e]+)"[^>]*>([^<]*)</text>`)
)

// drawSVG writes the chart of results and reads back its size, its paths
// and its strings.
func drawSVG(t *testing.T, results []*result) (w, h float64, marks []svgMark, texts []svgText) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chart.svg")
	if err := writeChart(path, results); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("a number in the SVG: %v", err)
		}
		return f
	}
	box := svgViewBox.FindStringSubmatch(svg)
	if box == nil {
		t.Fatal("the SVG has no viewBox")
	}
	w, h = num(box[1]), num(box[2])
	for _, m := range svgPath.FindAllStringSubmatch(svg, -1) {
		mark := svgMark{style: m[2]}
		for _, p := range svgPoint.FindAllStringSubmatch(m[1], -1) {
			mark.pts = append(mark.pts, [2]float64{num(p[1]), num(p[2])})
		}
		marks = append(marks, mark)
	}
	for _, m := range svgTextRe.FindAllStringSubmatch(svg, -1) {
		texts = append(texts, svgText{x: num(m[1]), y: -num(m[2]), text: html.UnescapeString(m[3])})
	}
	return w, h, marks, texts
}

// box is the rectangle a mark draws, if it draws one: four corners,
// filled, or outlined back to the first.
func (m svgMark) box() (minX, minY, maxX, maxY float64, ok bool) {
	pts := m.pts
	if len(pts) == 5 && pts[4] == pts[0] {
		pts = pts[:4]
	}
	if len(pts) != 4 {
		return 0, 0, 0, 0, false
	}
	xs, ys := map[float64]bool{}, map[float64]bool{}
	minX, minY, maxX, maxY = math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, p := range pts {
		xs[p[0]], ys[p[1]] = true, true
		minX, maxX, minY, maxY = min(minX, p[0]), max(maxX, p[0]), min(minY, p[1]), max(maxY, p[1])
	}
	return minX, minY, maxX, maxY, len(xs) == 2 && len(ys) == 2
}

// all are the texts that read s.
func all(texts []svgText, s string) []svgText {
	var got []svgText
	for _, t := range texts {
		if t.text == s {
			got = append(got, t)
		}
	}
	return got
}

// TestChartTimeTicksAreWholeSeconds: every number on the chart says its
// unit and has no fraction: the default ticks of a 52 s axis read 25.00,
// 50.00.
func TestChartTimeTicksAreWholeSeconds(t *testing.T) {
	_, _, _, texts := drawSVG(t, fakeResults())
	number := regexp.MustCompile(`^[\d.]+( ?[a-z]+)?$`)
	whole := regexp.MustCompile(`^\d+ (s|ms)$`)
	for _, text := range texts {
		if number.MatchString(text.text) && !whole.MatchString(text.text) {
			t.Errorf("tick label %q, want whole numbers with a unit (\"25 s\", \"10 ms\")", text.text)
		}
	}
	// The outage's panel, 52 s: ticks every 10 s.
	for _, want := range []string{"0 s", "10 s", "50 s", "1 ms", "100 ms", "1 s", "10 s"} {
		if len(all(texts, want)) == 0 {
			t.Errorf("no tick label %q", want)
		}
	}
}

// TestChartHasOneLegend: the panels draw the same things, and the legend
// says so once, with an entry for the outage and one for failed runs.
func TestChartHasOneLegend(t *testing.T) {
	_, _, _, texts := drawSVG(t, fakeResults())
	for _, entry := range []string{"authvault", "client-go exec plugin", "plugin run (1s each)", "failed plugin run", "issuer down: plugin runs fail"} {
		if got := len(all(texts, entry)); got != 1 {
			t.Errorf("legend entry %q drawn %d times, want once", entry, got)
		}
	}
}

// TestChartBackgroundIsOpaque: the first thing drawn fills the whole
// figure with an opaque color, so that a dark page does not show through
// between the panels.
func TestChartBackgroundIsOpaque(t *testing.T) {
	w, h, marks, _ := drawSVG(t, fakeResults())
	minX, minY, maxX, maxY, ok := marks[0].box()
	if !ok || minX > 0 || minY > 0 || maxX < w || maxY < h {
		t.Errorf("first path %v, want the whole %v×%v figure", marks[0].pts, w, h)
	}
	if !strings.HasPrefix(marks[0].style, "fill:#") || strings.Contains(marks[0].style, "opacity") {
		t.Errorf("first path's style %q, want an opaque fill", marks[0].style)
	}
}

// TestChartRunsHaveALaneOfTheirOwn: each side's plugin runs are bars in a
// lane named after the side, under the latency axis (below its lowest
// label, 1 ms), one bar per run, outlined when the run failed.
func TestChartRunsHaveALaneOfTheirOwn(t *testing.T) {
	results := fakeResults()
	_, _, marks, texts := drawSVG(t, results)
	lowest := all(texts, "1 ms")
	if len(lowest) != len(results) {
		t.Errorf("%d latency axes labelled 1 ms, want %d", len(lowest), len(results))
	}
	for j, name := range []string{"authvault", "client-go"} {
		rgba := color.RGBAModel.Convert(sideColors[j]).(color.RGBA)
		hex := fmt.Sprintf("#%02X%02X%02X", rgba.R, rgba.G, rgba.B)
		lanes := all(texts, name+" runs")
		if len(lanes) != len(results) {
			t.Errorf("%d lanes named %q, want one per panel (%d)", len(lanes), name+" runs", len(results))
			continue
		}
		for i, r := range results {
			// The lane's label is centered on it: its bars span the
			// middle of the label's lower-case letters.
			middle := lanes[i].y + 2.5
			var filled, outlined int
			for _, m := range marks {
				_, minY, _, maxY, ok := m.box()
				if !ok || middle < minY || middle > maxY {
					continue
				}
				switch {
				case m.style == "fill:"+hex:
					filled++
				case strings.HasPrefix(m.style, "fill:none;stroke:"+hex):
					outlined++
				default:
					continue
				}
				if len(lowest) == len(results) && maxY >= lowest[i].y {
					t.Errorf("%s: a bar of %s's runs reaches %.1f, at or above the latency axis's 1 ms (%.1f)", r.scenario.name, name, maxY, lowest[i].y)
				}
			}
			var ok, failed int
			for _, run := range r.sides[j].endpoint.Runs() {
				if run.ok {
					ok++
				} else {
					failed++
				}
			}
			if filled != ok || outlined != failed {
				t.Errorf("%s: %s's lane has %d filled and %d outlined bars, want %d runs and %d failed ones", r.scenario.name, name, filled, outlined, ok, failed)
			}
		}
	}
}

// TestChartPreview writes the chart of fakeResults to $CHART_PREVIEW (.svg
// or .png), to look at while changing the chart.
func TestChartPreview(t *testing.T) {
	path := os.Getenv("CHART_PREVIEW")
	if path == "" {
		t.Skip("CHART_PREVIEW is not set")
	}
	if err := writeChart(path, fakeResults()); err != nil {
		t.Fatal(err)
	}
}
