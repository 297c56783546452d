package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Markdown is the run's tables for docs/benchmarks.md: the run, the
// failures by component and kind, the resources, the rates and the
// faults, both sides side by side.
func (s *Summary) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %v: settled after %v, faults until %v, %d fleet clusters.\n\n",
		round(s.End.Sub(s.Start)), round(s.Settled.Sub(s.Start)), round(s.FaultsEnd.Sub(s.Start)), s.Clusters)
	s.failuresMarkdown(&b)
	s.resourcesMarkdown(&b)
	s.ratesMarkdown(&b)
	s.faultsMarkdown(&b)
	return b.String()
}

// round is d to the second, for reading.
func round(d time.Duration) time.Duration { return d.Round(time.Second) }

// row writes one table row of cells.
func row(b *strings.Builder, cells ...string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

// header writes a table's header and its alignment line: the first left
// columns, which name the row, aligned left, the figures right.
func header(b *strings.Builder, left int, cells ...string) {
	row(b, cells...)
	var align []string
	for i := range cells {
		if i < left {
			align = append(align, "---")
		} else {
			align = append(align, "---:")
		}
	}
	row(b, align...)
}

func (s *Summary) failuresMarkdown(b *strings.Builder) {
	b.WriteString("#### Caller-visible failures\n\n")
	type key struct{ component, kind string }
	var keys []key
	for _, ss := range s.Sides {
		for _, f := range ss.Failures {
			if k := (key{f.Component, f.Kind}); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		b.WriteString("None on any side.\n\n")
	} else {
		slices.SortFunc(keys, func(a, b key) int {
			return strings.Compare(a.component+"\x00"+a.kind, b.component+"\x00"+b.kind)
		})
		cells := []string{"component", "kind"}
		for _, ss := range s.Sides {
			cells = append(cells, ss.Role+": explained (by)", ss.Role+": unexplained")
		}
		header(b, 2, cells...)
		for _, k := range keys {
			cells := []string{k.component, k.kind}
			for _, ss := range s.Sides {
				i := slices.IndexFunc(ss.Failures, func(f Failures) bool { return f.Component == k.component && f.Kind == k.kind })
				if i < 0 {
					cells = append(cells, "0", "0")
					continue
				}
				f := ss.Failures[i]
				cells = append(cells, explained(f), fmt.Sprint(f.Unexplained))
			}
			row(b, cells...)
		}
		b.WriteString("\n")
	}
	for _, ss := range s.Sides {
		if ss.Unexplained == 0 {
			continue
		}
		fmt.Fprintf(b, "%s: %d unexplained, the first:\n\n", ss.Role, ss.Unexplained)
		for _, x := range ss.First {
			where := x.Component
			if x.Cluster != "" {
				where += " " + x.Cluster
			}
			fmt.Fprintf(b, "- at %v: %s, %s: %s\n", x.Since.Round(time.Millisecond), where, x.Kind, strings.ReplaceAll(x.Message, "\n", " "))
		}
		b.WriteString("\n")
	}
}

// explained is the cell of f's explained failures: how many, and by
// which kinds of faults.
func explained(f Failures) string {
	if f.Explained == 0 {
		return "0"
	}
	var by []string
	for _, kind := range slices.Sorted(maps.Keys(f.By)) {
		by = append(by, fmt.Sprintf("%s %d", kind, f.By[kind]))
	}
	return fmt.Sprintf("%d (%s)", f.Explained, strings.Join(by, ", "))
}

func (s *Summary) resourcesMarkdown(b *strings.Builder) {
	b.WriteString("#### Resources\n\n")
	b.WriteString("Baseline: each count's median over the window before the faults; end: its least over the window before the run's end; slope: least squares over the second half of the run.\n\n")
	header(b, 2, "metric", "side", "baseline", "min", "max", "final", "slope /h", "slope %/h")
	for _, m := range metrics {
		name := m.String()
		if m == HeapInUse {
			name += " (MiB)"
		}
		for _, ss := range s.Sides {
			r := ss.Resources[m]
			row(b, name, ss.Role, value(m, r.Baseline), value(m, r.Min), value(m, r.Max), value(m, r.Final),
				slope(m, r.Slope), percent(r.SlopePercent))
		}
	}
	b.WriteString("\n")
}

// value is v of m as the tables show it: the heap in MiB, counts whole.
func value(m Metric, v float64) string {
	if m == HeapInUse {
		return fmt.Sprintf("%.1f", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}

// slope is a slope of m per hour as the tables show it.
func slope(m Metric, v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	if m == HeapInUse {
		return fmt.Sprintf("%+.2f", v/(1<<20))
	}
	return fmt.Sprintf("%+.2f", v)
}

func percent(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%+.2f", v)
}

func (s *Summary) ratesMarkdown(b *strings.Builder) {
	b.WriteString("#### Activity\n\n")
	cells := []string{""}
	for _, ss := range s.Sides {
		cells = append(cells, ss.Role)
	}
	header(b, 1, cells...)
	line := func(name string, f func(*SideSummary) string) {
		cells := []string{name}
		for _, ss := range s.Sides {
			cells = append(cells, f(ss))
		}
		row(b, cells...)
	}
	line("log lines per hour per cluster", func(ss *SideSummary) string { return fmt.Sprintf("%.1f", ss.LogLinesPerClusterHour) })
	line("logins per hour", func(ss *SideSummary) string { return fmt.Sprintf("%.1f", ss.LoginsPerHour) })
	line("logins per hour the tokens' lives predict", func(ss *SideSummary) string { return fmt.Sprintf("%.1f", ss.PredictedPerHour) })
	line("logins / predicted", func(ss *SideSummary) string {
		if math.IsNaN(ss.LoginRatio) {
			return "–"
		}
		return fmt.Sprintf("%.2f", ss.LoginRatio)
	})
	line("requests per second", func(ss *SideSummary) string { return fmt.Sprintf("%.1f", ss.RequestsPerSecond) })
	line("samples", func(ss *SideSummary) string { return fmt.Sprint(ss.Samples) })
	line("leaked secrets", func(ss *SideSummary) string { return fmt.Sprint(len(ss.Leaked)) })
	b.WriteString("\n")
}

func (s *Summary) faultsMarkdown(b *strings.Builder) {
	b.WriteString("#### Faults\n\n")
	if len(s.Faults) == 0 {
		b.WriteString("None.\n")
		return
	}
	// A shared fleet's clusters unowned, per kind of fault that explains
	// them: how many samples, the longest stretch of one cluster in one
	// fault, and how long past its fault's end the last came.
	header(b, 1, "fault", "times", "total duration", "unowned samples", "longest unowned", "unowned past its end")
	for _, f := range s.Faults {
		row(b, f.Kind, fmt.Sprint(f.Count), round(f.Total).String(), fmt.Sprint(f.Unowned),
			f.UnownedFor.Round(100*time.Millisecond).String(), f.PastEnd.Round(100*time.Millisecond).String())
	}
}
