package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/testkit/testwait"
)

const r56Path = "/apis/dashboard.example.com/v1/notes"

// r56Upstream counts bodies read whole and _method values served as
// gorilla/handlers.HTTPMethodOverrideHandler would (r.FormValue).
type r56Upstream struct {
	mu        sync.Mutex
	whole     int
	overrides []string
}

func (u *r56Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	m := r.FormValue("_method")
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil {
		u.whole++
	}
	if m != "" {
		u.overrides = append(u.overrides, m)
	}
}

func (u *r56Upstream) counts() (int, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.whole, len(u.overrides)
}

func r56Proxy(t *testing.T, up http.Handler) *httptest.Server {
	t.Helper()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	u, _ := url.Parse(upSrv.URL)
	srv := httptest.NewServer(upstreamHandler(config{upstream: u, apiService: dashboard}, http.DefaultTransport, logr.Discard()))
	t.Cleanup(srv.Close)
	return srv
}

func r56Post(t *testing.T, srv *httptest.Server, ctype, encoding string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+r56Path, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

type r56Case struct{ name, ctype, encoding, body string }

// r56Refused fails each case whose body reached the upstream whole.
func r56Refused(t *testing.T, cases []r56Case) {
	t.Helper()
	up := &r56Upstream{}
	srv := r56Proxy(t, up)
	for _, tc := range cases {
		w0, o0 := up.counts()
		code := r56Post(t, srv, tc.ctype, tc.encoding, []byte(tc.body))
		w1, o1 := up.counts()
		if w1 != w0 || o1 != o0 {
			t.Errorf("%s: %d; the upstream read the whole body (%d) and served %d _method; want 403 and neither", tc.name, code, w1-w0, o1-o0)
		}
	}
}

const r56Part = "Content-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n"

// A form is what the laxest framework reads as one: Go with a bad
// parameter, PHP cutting at a comma, Rack with no Content-Type or any
// multipart type.
func TestFormGuardReadsFormsAsTheLaxestFrameworkDoes(t *testing.T) {
	r56Refused(t, []r56Case{
		{"net/http: bare param", "application/x-www-form-urlencoded; charset", "", "_method=DELETE"},
		{"net/http: unterminated quote", "application/x-www-form-urlencoded; charset=\"utf-8", "", "_method=DELETE"},
		{"PHP: comma", "application/x-www-form-urlencoded, text/plain", "", "_method=DELETE"},
		{"PHP: multipart, comma", "multipart/form-data, boundary=B", "", "--B\r\n" + r56Part + "--B--\r\n"},
		{"PHP: multipart, bad param", "multipart/form-data; boundary=B; x", "", "--B\r\n" + r56Part + "--B--\r\n"},
		{"Rack: no Content-Type", "", "", "_method=DELETE"},
		{"Rack: multipart/mixed", "multipart/mixed; boundary=B", "", "--B\r\n" + r56Part + "--B--\r\n"},
	})
}

// What PHP or Rack reads as a _method part and Go's parser cannot read,
// or reads otherwise.
func TestFormGuardRefusesMultipartItCannotReadToItsEnd(t *testing.T) {
	const ct = "multipart/form-data; boundary=B"
	r56Refused(t, []r56Case{
		{"PHP: a part after the close delimiter", ct, "", "--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--B--\r\n--B\r\n" + r56Part + "--B--\r\n"},
		{"PHP: a preamble line over 4 KiB", ct, "", strings.Repeat("p", 5000) + "\r\n--B\r\n" + r56Part + "--B--\r\n"},
		{"PHP: a header line without a colon", ct, "", "--B\r\njunk\r\n" + r56Part + "--B--\r\n"},
		{"PHP: a bad disposition parameter", ct, "", "--B\r\nContent-Disposition: form-data; name=\"_method\"; x\r\n\r\nDELETE\r\n--B--\r\n"},
		{"PHP: single-quoted name", ct, "", "--B\r\nContent-Disposition: form-data; name='_method'\r\n\r\nDELETE\r\n--B--\r\n"},
		{"PHP: xboundary", "multipart/form-data; xboundary=A; boundary=B", "", "--A\r\n" + r56Part + "--A--\r\n"},
		{"Rack: Content-ID", ct, "", "--B\r\nContent-ID: _method\r\n\r\nDELETE\r\n--B--\r\n"},
		{"Rack: name= in another parameter", ct, "", "--B\r\nContent-Disposition: form-data; name=\"a\"; x=\" name=_method\"\r\n\r\nDELETE\r\n--B--\r\n"},
	})
}

// A body in a charset that is not ASCII's, or encoded, cannot be read as
// it streams: refused.
func TestFormGuardRefusesBodiesInAnotherCharsetOrEncoding(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("_method=DELETE"))
	_ = zw.Close()
	r56Refused(t, []r56Case{
		{"UTF-16LE", "application/x-www-form-urlencoded; charset=utf-16le", "", "%5F%00m%00e%00t%00h%00o%00d%00=D%00E%00L%00E%00T%00E%00"},
		{"gzip", "application/x-www-form-urlencoded", "gzip", gz.String()},
	})
}

// r56Parsers counts live multipart parser goroutines, waiting for them
// to fall to want (testwait.Hang bounds a hang, not the machine's speed).
func r56Parsers(want int) int {
	var n int
	for deadline := time.Now().Add(testwait.Hang); ; time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		n = strings.Count(string(buf[:runtime.Stack(buf, true)]), ".guardForm.func")
		if n <= want || time.Now().After(deadline) {
			return n
		}
	}
}

// The parser ends whatever the transport leaves of the body.
func TestFormGuardParserEndsWhenTheUpstreamStopsReading(t *testing.T) {
	const ct = "multipart/form-data; boundary=B"
	t.Run("upstream down", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		u, _ := url.Parse("http://" + ln.Addr().String())
		ln.Close()
		srv := httptest.NewServer(upstreamHandler(config{upstream: u, apiService: dashboard}, http.DefaultTransport, logr.Discard()))
		t.Cleanup(srv.Close)
		before := r56Parsers(0)
		for range 5 {
			if code := r56Post(t, srv, ct, "", []byte("--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--B--\r\n")); code != http.StatusBadGateway {
				t.Fatalf("%d, want 502", code)
			}
		}
		if n := r56Parsers(before); n > before {
			t.Errorf("%d parser goroutines left by 5 requests to an upstream that is down", n-before)
		}
	})
	t.Run("upstream answers without reading", func(t *testing.T) {
		srv := r56Proxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		}))
		body := []byte("--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n" + strings.Repeat("x", 1<<20) + "\r\n--B--\r\n")
		before := r56Parsers(0)
		for range 5 {
			r56Post(t, srv, ct, "", body)
		}
		if n := r56Parsers(before); n > before {
			t.Errorf("%d parser goroutines left by 5 requests the upstream answered unread", n-before)
		}
	})
}
