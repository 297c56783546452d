package main

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"sync"

	"github.com/authvault/authvault/internal/methodoverride"
)

// errBodyOverride: a form body names a _method, which the upstream may
// serve as the request's method instead of the one the API server
// authorized.
var errBodyOverride = errors.New("a _method field in the form body")

// formGuard is a POST's form body on its way to the upstream, read as it
// streams for a _method field (Rails, Laravel, Symfony, Spring and
// Phoenix honour one there by default): one found fails the body's read,
// so the upstream never gets the whole of it. The last bytes read are
// held back until the rest has been read through, so that the upstream
// has no complete body before the verdict: a framework reads a whole form
// before it acts on it. Nothing is buffered beyond one read.
type formGuard struct {
	body     io.ReadCloser
	held     []byte // read, not handed on yet: the newest bytes
	out      []byte // handed on next
	finalErr error  // once the body has ended: io.EOF, the body's error or errBodyOverride

	scan func([]byte) // reads bytes for the verdict
	end  func() bool  // the body ended: reports whether a _method was found
	mu   sync.Mutex   // guards hit: the multipart parser runs beside Read
	hit  bool         // a _method was found
}

// guardForm wraps r's body when r is a POST with a form body; it returns
// the guard, or nil when r has none.
func guardForm(r *http.Request) *formGuard {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil // no framework reads a form from it either
	}
	g := &formGuard{body: r.Body}
	switch mt {
	case "application/x-www-form-urlencoded":
		var name methodoverride.Name
		inName := true
		g.scan = func(p []byte) {
			for _, c := range p {
				switch {
				case c == '&' || c == ';':
					if inName && name.Is() {
						g.found()
					}
					name, inName = methodoverride.Name{}, true
				case !inName:
				case c == '=':
					if name.Is() {
						g.found()
					}
					inName = false
				default:
					name.Feed(c)
				}
			}
		}
		g.end = func() bool {
			if inName && name.Is() {
				g.found()
			}
			return g.sawOverride()
		}
	case "multipart/form-data":
		boundary := params["boundary"]
		if boundary == "" {
			return nil
		}
		pr, pw := io.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer pr.Close()
			mr := multipart.NewReader(pr, boundary)
			for {
				part, err := mr.NextRawPart()
				if err != nil {
					_, _ = io.Copy(io.Discard, pr) // what is left: the writer must not block
					return
				}
				if methodoverride.IsParam(part.FormName()) {
					g.found()
				}
				_, _ = io.Copy(io.Discard, part)
			}
		}()
		g.scan = func(p []byte) { _, _ = pw.Write(p) }
		g.end = func() bool {
			_ = pw.Close()
			<-done
			return g.sawOverride()
		}
		// A request that ends early (its caller gone, the upstream
		// failed) still ends the parser: Close closes the pipe.
		g.body = &closeAlso{ReadCloser: r.Body, also: func() { _ = pw.CloseWithError(io.ErrClosedPipe); <-done }}
	default:
		return nil
	}
	return g
}

func (g *formGuard) found() {
	g.mu.Lock()
	g.hit = true
	g.mu.Unlock()
}

func (g *formGuard) sawOverride() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hit
}

// refused tells whether the body was refused for a _method in it.
func (g *formGuard) refused() bool { return g.sawOverride() }

// formGuardKey keys a request's formGuard in its context, for the
// proxy's error handler.
type formGuardKey struct{}

func (g *formGuard) Read(p []byte) (int, error) {
	for {
		if len(g.out) > 0 {
			n := copy(p, g.out)
			g.out = g.out[n:]
			return n, nil
		}
		if g.finalErr != nil {
			return 0, g.finalErr
		}
		if g.sawOverride() {
			g.end() // the parser, if any, stops here
			g.finalErr, g.out, g.held = errBodyOverride, nil, nil
			continue
		}
		buf := make([]byte, 32<<10)
		n, err := g.body.Read(buf)
		if n > 0 {
			g.scan(buf[:n])
			g.out, g.held = g.held, bytes.Clone(buf[:n])
		}
		switch {
		case err == io.EOF:
			if g.end() {
				g.finalErr, g.out, g.held = errBodyOverride, nil, nil
				continue
			}
			g.out, g.held, g.finalErr = append(g.out, g.held...), nil, io.EOF
		case err != nil:
			g.end()
			g.finalErr, g.out, g.held = err, nil, nil // nothing held back goes on after a failed read
		}
	}
}

func (g *formGuard) Close() error { return g.body.Close() }

// closeAlso is a body whose Close also runs also, once.
type closeAlso struct {
	io.ReadCloser
	also func()
	once sync.Once
}

func (c *closeAlso) Close() error {
	err := c.ReadCloser.Close()
	c.once.Do(c.also)
	return err
}
