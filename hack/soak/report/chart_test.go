package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteChartSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "soak.svg")
	if err := WriteChart(path, markdownRun()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// It is XML, whose root is an svg element.
	d := xml.NewDecoder(bytes.NewReader(raw))
	var root, viewBox string
	var first map[string]string // the attributes of the first path drawn
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = el.Name.Local
		}
		if el.Name.Local == "svg" || (el.Name.Local == "path" && first == nil) {
			attrs := map[string]string{}
			for _, a := range el.Attr {
				attrs[a.Name.Local] = a.Value
			}
			if el.Name.Local == "svg" {
				viewBox = attrs["viewBox"]
			} else {
				first = attrs
			}
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	// The first thing drawn is an opaque white rectangle over the whole
	// figure: SVG is transparent where nothing is drawn.
	var w, h string
	if f := strings.Fields(viewBox); len(f) == 4 {
		w, h = f[2], f[3]
	}
	if want := "M0,0L" + w + ",0L" + w + "," + h + "L0," + h + "Z"; first["d"] != want || first["style"] != "fill:#FFFFFF" {
		t.Errorf("the first path is %v, want d %q, style fill:#FFFFFF", first, want)
	}
	// The legend names both sides and each kind of fault; the panels
	// their metrics; the axis its unit.
	for _, want := range []string{"authvault", "client-go", "revocation", "apiserver-restart", "unexplained failure",
		"heap in use (MiB)", "goroutines", "file descriptors", "connections", "60 min"} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("the SVG has no %q", want)
		}
	}
}

func TestWriteChartPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "soak.png")
	if err := WriteChart(path, markdownRun()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 500 || b.Dy() < 500 {
		t.Errorf("the PNG is %v, want a figure", b)
	}
	// The background is opaque white, at the corners too.
	for _, p := range [][2]int{{b.Min.X, b.Min.Y}, {b.Max.X - 1, b.Max.Y - 1}} {
		if r, g, bl, a := img.At(p[0], p[1]).RGBA(); r != 0xffff || g != 0xffff || bl != 0xffff || a != 0xffff {
			t.Errorf("pixel %v = %x %x %x %x, want opaque white", p, r, g, bl, a)
		}
	}
}

func TestWriteChartQuietRun(t *testing.T) {
	// No fault, no failure, a run of two minutes: still a chart.
	path := filepath.Join(t.TempDir(), "soak.svg")
	if err := WriteChart(path, flatRun(2*time.Minute, nil)); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("2 min")) {
		t.Errorf("the two-minute chart has no tick at 2 min")
	}
	if bytes.Contains(raw, []byte("unexplained failure")) {
		t.Errorf("the legend of a run without failures names them")
	}
}

func TestWriteChartRefusesOtherFormats(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"soak.pdf", "soak", "soak.SVG.txt"} {
		path := filepath.Join(dir, name)
		err := WriteChart(path, markdownRun())
		if err == nil {
			t.Errorf("WriteChart(%q) = nil, want an error", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "report: ") || !strings.Contains(err.Error(), path) {
			t.Errorf("WriteChart(%q) = %q, want it to start with the package and name the path", name, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("WriteChart(%q) left a file: %v", name, err)
		}
	}
}

func TestMinuteTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   string // the labels
	}{
		{0, 60, "0 min,5 min,10 min,15 min,20 min,25 min,30 min,35 min,40 min,45 min,50 min,55 min,60 min"},
		{0, 2, "0 min,0.25 min,0.5 min,0.75 min,1 min,1.25 min,1.5 min,1.75 min,2 min"},
		{0, 480, "0 min,50 min,100 min,150 min,200 min,250 min,300 min,350 min,400 min,450 min"},
		{0, 0, ""},
	}
	for _, tt := range tests {
		var labels []string
		for _, tick := range (minuteTicks{labels: true}).Ticks(tt.lo, tt.hi) {
			labels = append(labels, tick.Label)
		}
		if got := strings.Join(labels, ","); got != tt.want {
			t.Errorf("Ticks(%v, %v) = %s, want %s", tt.lo, tt.hi, got, tt.want)
		}
	}
}
