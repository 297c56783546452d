package methodoverride

import (
	"net/http/httptest"
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
