package methodoverride

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every spelling a framework reads as an override is one; names that only
// look like it are not.
func TestIn(t *testing.T) {
	for _, tc := range []struct {
		target, header string
		want           bool
	}{
		{"/x", "X-HTTP-Method-Override", true},
		{"/x", "x-http-method", true},
		{"/x", "X_Method_Override", true},
		{"/x?_method=DELETE", "", true},
		{"/x?%5fmethod=DELETE", "", true},
		{"/x?+_method=DELETE", "", true}, // a leading space is dropped
		{"/x?.method=DELETE", "", true},  // "." reads as "_"
		{"/x?_method[]=DELETE", "", true},
		{"/x?_method%00x=DELETE", "", true},
		{"/x?a=1;_METHOD=delete", "", true},
		{"/x", "X-HTTP-Method-Overrides", false},
		{"/x?method=DELETE", "", false},
		{"/x?_methods=DELETE", "", false},
		{"/x?x_method=DELETE", "", false},
		{"/x?a=_method", "", false},
	} {
		r := httptest.NewRequest("POST", tc.target, nil)
		if tc.header != "" {
			r.Header[tc.header] = []string{"DELETE"}
		}
		if got := In(r); got != tc.want {
			t.Errorf("%s %s: In = %v, want %v", tc.target, tc.header, got, tc.want)
		}
	}
}

// The streaming reader reads a name as the one-pass reading of the whole
// name (a reference written as PHP's rules say) does, however it is cut.
func FuzzName(f *testing.F) {
	for _, s := range []string{"_method", "%5Fmethod", "+_method", ".method", "_method[x", "_method%00", "%4", "%zz_method", "_METHOD", "__method", "%5f%6d%65%74%68%6f%64"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if got, want := IsParam(k), reference(k); got != want {
			t.Errorf("IsParam(%q) = %v, want %v", k, got, want)
		}
	})
}

// reference reads a whole name at once by PHP's rules.
func reference(k string) bool {
	var b []byte
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c == '%' && i+2 < len(k) {
			if v, err := strconv.ParseUint(k[i+1:i+3], 16, 8); err == nil {
				c = byte(v)
				i += 2
			}
		} else if c == '+' {
			c = ' '
		}
		if c == 0 || c == '[' {
			break
		}
		switch {
		case c == ' ' && len(b) == 0:
			continue
		case c == ' ' || c == '.':
			c = '_'
		}
		b = append(b, c)
	}
	return strings.EqualFold(string(b), "_method")
}
