package weborigin

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An origin is spelled as a browser sends it; what no browser sends is
// refused, since it would never match.
func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP://LocalHost:8001":        "http://localhost:8001",
		"https://dash.example.com:443": "https://dash.example.com",
		"http://localhost:80":          "http://localhost",
		"http://127.0.0.1:08001":       "http://127.0.0.1:8001",
		"http://[0:0::1]:8001":         "http://[::1]:8001",
		"https://bücher.example":       "https://xn--bcher-kva.example",
		"https://BÜCHER.example":       "https://xn--bcher-kva.example",
		"http://127.0.0.1":             "http://127.0.0.1",
	} {
		if got, err := Normalize(in); err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"localhost:8001", "http://localhost:8001/", "http://user@x", "ftp://x", "http://x?y", "http://x:99999", "", "null",
		"http://0x7f.1:8001", "http://2130706433:8001", "http://127.0.0.01", "http://127.1"} {
		if got, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", bad, got)
		}
	}
}
