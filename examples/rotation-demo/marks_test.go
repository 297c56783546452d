package main

import (
	"fmt"
	"image/color"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"
)

// hexOf is c as the SVG writes it.
func hexOf(c color.Color) string {
	rgba := color.RGBAModel.Convert(c).(color.RGBA)
	return fmt.Sprintf("#%02X%02X%02X", rgba.R, rgba.G, rgba.B)
}

// TestChartMarksEveryCallerVisibleError: each request that handed its
// caller a 401 is a cross in its side's color, each other error a
// triangle, and the legend shows each kind once per side.
func TestChartMarksEveryCallerVisibleError(t *testing.T) {
	results := fakeResults()
	_, _, marks, texts := drawSVG(t, results)
	for _, kind := range []struct {
		err    outcome
		points int // the glyph's path: a cross's two strokes, a triangle's three corners
	}{{unauthorized, 4}, {otherError, 3}} {
		if got := len(all(texts, errorNames[kind.err])); got != 1 {
			t.Errorf("legend entry %q drawn %d times, want once", errorNames[kind.err], got)
		}
		for i, col := range sideColors {
			want := 1 // the legend's
			for _, r := range results {
				for _, s := range r.sides[i].samples {
					if s.err == kind.err {
						want++
					}
				}
			}
			style := fmt.Sprintf("fill:none;stroke:%s;stroke-width:%g", hexOf(col), errorStroke.Points())
			got := 0
			for _, m := range marks {
				if m.style == style && len(m.pts) == kind.points {
					got++
				}
			}
			if got != want {
				t.Errorf("%s: %d marks of %q, want %d (one per request, one in the legend)", results[0].sides[i].name, got, errorNames[kind.err], want)
			}
		}
	}
}

// TestChartDotsTheStalls: where no request started for a while, each
// side's line goes on dotted, once per stall, and the legend says what
// the dots are.
func TestChartDotsTheStalls(t *testing.T) {
	_, _, marks, texts := drawSVG(t, fakeResults())
	if got := len(all(texts, "no request started: every worker waiting (dotted)")); got != 1 {
		t.Errorf("the stalls' legend entry drawn %d times, want once", got)
	}
	// fakeResult stalls client-go's side every 10 s from 5 s: twice in
	// 24 s, 4 times in 45 s, 5 times in 52 s; the legend dots each side.
	for i, want := range []int{0 + 1, 11 + 1} {
		got := 0
		for _, m := range marks {
			if strings.HasPrefix(m.style, "fill:none;stroke:"+hexOf(sideColors[i])) && strings.Contains(m.style, "stroke-dasharray") {
				got++
			}
		}
		if got != want {
			t.Errorf("side %d: %d dotted lines, want %d", i, got, want)
		}
	}
}

// TestStallsCarryTheLastRequestAcross: a stall's line runs from the last
// point before the gap, at its height, to where the next stretch begins.
func TestStallsCarryTheLastRequestAcross(t *testing.T) {
	stretches := []plotter.XYs{
		{{X: 0, Y: 1}, {X: 0.1, Y: 3}},
		{{X: 1.2, Y: 1.5}},
		{{X: 1.5, Y: 1}},
	}
	got := stalls(stretches)
	want := []plotter.XYs{{{X: 0.1, Y: 3}, {X: 1.2, Y: 3}}, {{X: 1.2, Y: 1.5}, {X: 1.5, Y: 1.5}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stalls = %v, want %v", got, want)
	}
	if got := stalls(stretches[:1]); got != nil {
		t.Errorf("stalls of one stretch = %v, want none", got)
	}
}

// TestChartTitlesStateTheirClaim: each panel's title says what the
// scenario does and, under it, its claim in the run's figures.
func TestChartTitlesStateTheirClaim(t *testing.T) {
	results := fakeResults()
	_, _, _, texts := drawSVG(t, results)
	for _, r := range results {
		title, claimLine, _ := strings.Cut(panelTitle(r), "\n")
		for _, line := range []string{title, claimLine} {
			if len(all(texts, line)) != 1 {
				t.Errorf("%s: no title line %q", r.scenario.name, line)
			}
		}
	}
}

// TestClaim: the claims are the figures', and a claim that both sides
// waited is made only when both did.
func TestClaim(t *testing.T) {
	sides := func(av, cg figures) []*side {
		return []*side{{name: "authvault", figures: av}, {name: "client-go exec plugin", figures: cg}}
	}
	for _, tc := range []struct {
		scenario string
		av, cg   figures
		want     string
	}{
		{"revocation", figures{slow: 16}, figures{slow: 12, unauthorized: 11},
			"both sides wait for a new token (requests waited: authvault 16, client-go 12); caller-visible 401s: authvault 0, client-go 11"},
		{"revocation", figures{}, figures{slow: 12, unauthorized: 11, other: 2},
			"requests waited: authvault 0, client-go 12; caller-visible 401s: authvault 0, client-go 11; other errors: authvault 0, client-go 2"},
		{"expiry", figures{longest: 62 * time.Millisecond}, figures{slow: 16, longest: 1060 * time.Millisecond},
			"requests that waited for a credential: authvault 0, client-go 16; longest request: authvault 62ms, client-go 1.06s"},
		{"outage", figures{longest: 63 * time.Millisecond}, figures{other: 9, unauthorized: 1, longest: 9460 * time.Millisecond},
			"caller-visible errors: authvault 0, client-go 10; longest request: authvault 63ms, client-go 9.46s"},
	} {
		r := &result{scenario: &scenario{name: tc.scenario}, sides: sides(tc.av, tc.cg)}
		if got := claim(r); got != tc.want {
			t.Errorf("%s: claim\n%q, want\n%q", tc.scenario, got, tc.want)
		}
	}
}

// TestChartCountsClusteredErrors: errors of one kind that start within
// errorCluster of each other draw one glyph over another, so the
// cluster's count is written above it; a lone error is not labelled.
func TestChartCountsClusteredErrors(t *testing.T) {
	_, _, _, texts := drawSVG(t, fakeResults())
	// fakeResults: three 401s 20 ms apart in the revocation scenario, two
	// other errors 2 s apart in the outage.
	if got := len(all(texts, "3 401s")); got != 1 {
		t.Errorf("the revocation's cluster of 401s labelled %d times, want once", got)
	}
	for _, text := range texts {
		if strings.HasSuffix(text.text, " errors") && text.text != "other errors" {
			t.Errorf("label %q: the outage's errors are apart and need none", text.text)
		}
	}
}
