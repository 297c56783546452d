package addonauth

import (
	"io"
	"net/http"
)

// stripTrailers keeps a caller from claiming an identity in trailers,
// which an upstream in the same process reads in r.Trailer once it has
// read the body. net/http fills that map (shared by r and its copies)
// with every trailer the caller sends after the body, declared or not,
// when the request declared some; r.Body is wrapped to remove the
// identity ones as the body ends, before its reader sees the end.
// Without a declaration the map is nil in r and stays nil: net/http
// gives the trailers to the server's own request, not to r's copy.
func (a *Authenticator) stripTrailers(r *http.Request) {
	if r.Trailer == nil {
		return
	}
	a.dropIdentityTrailers(r.Trailer) // declared: names with nil values
	r.Body = &trailerFilter{ReadCloser: r.Body, a: a, trailer: r.Trailer}
}

func (a *Authenticator) dropIdentityTrailers(trailer http.Header) {
	for name := range trailer {
		if a.isIdentityHeader(name) {
			delete(trailer, name)
		}
	}
}

// trailerFilter removes identity trailers when the body it reads ends,
// and when it is closed: net/http's Close reads what is left of a small
// body, trailers included.
type trailerFilter struct {
	io.ReadCloser
	a       *Authenticator
	trailer http.Header
}

func (f *trailerFilter) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if err == io.EOF {
		f.a.dropIdentityTrailers(f.trailer)
	}
	return n, err
}

func (f *trailerFilter) Close() error {
	err := f.ReadCloser.Close()
	f.a.dropIdentityTrailers(f.trailer)
	return err
}
