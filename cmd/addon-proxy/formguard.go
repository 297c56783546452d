package main

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"

	"github.com/authvault/authvault/internal/methodoverride"
)

// errBodyOverride: a form body names a _method, which the upstream may
// serve as the request's method instead of the one the API server
// authorized, or cannot be read well enough to tell.
var errBodyOverride = errors.New("a _method field in the form body")

// formGuard is a POST's form body on its way to the upstream, read as it
// streams for a _method field (Rails, Laravel, Symfony, Spring and
// Phoenix honour one there by default): one found fails the body's read,
// so the upstream never gets the whole of it. The last bytes read are
// held back until the rest has been read through, so that the upstream
// has no complete body before the verdict: a framework reads a whole form
// before it acts on it. Nothing is buffered beyond one read.
//
// What is a form is read as the laxest of those frameworks reads it: the
// media type cut at ";", "," or a space, in any case, no Content-Type at
// all (Rack), any multipart type; a multipart body the parser cannot read
// to its close delimiter, or with more than whitespace after it, counts
// as one with a _method (PHP reads parts Go's parser refuses).
type formGuard struct {
	body     io.ReadCloser
	held     []byte // read, not handed on yet: the newest bytes
	out      []byte // handed on next
	finalErr error  // once the body has ended: io.EOF, the body's error or errBodyOverride

	scan func([]byte) // reads bytes for the verdict
	end  func()       // the body ended, or is left: the verdict is in once it returns

	mu  sync.Mutex // guards hit: the multipart parser runs beside Read
	hit bool       // a _method was found
}

// formGuardKey keys a request's formGuard in its context, for the
// proxy's error handler.
type formGuardKey struct{}

// errUncheckable: a form body that cannot be read for a _method as it
// streams (another charset or a Content-Encoding, an ambiguous boundary).
var errUncheckable = errors.New("a form body that cannot be checked for a _method")

// guardForm wraps r's body when r is a POST with what a framework may
// read as a form; it returns the guard (nil when r has none), or
// errUncheckable for a form that cannot be checked.
func guardForm(r *http.Request) (*formGuard, error) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, nil
	}
	ct := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Type")))
	mt := ct
	if i := strings.IndexAny(ct, ";, \t"); i >= 0 {
		mt = ct[:i]
	}
	multi := strings.HasPrefix(mt, "multipart/")
	if mt != "" && mt != "application/x-www-form-urlencoded" && !multi {
		return nil, nil
	}
	_, params, _ := mime.ParseMediaType(ct) // its parameters, as far as they parse
	if enc := r.Header.Values("Content-Encoding"); len(enc) > 0 && !(len(enc) == 1 && strings.EqualFold(strings.TrimSpace(enc[0]), "identity")) {
		return nil, errUncheckable
	}
	if cs := params["charset"]; cs != "" && !asciiCompatible(cs) {
		return nil, errUncheckable
	}
	g := &formGuard{body: r.Body}
	if !multi {
		g.urlencoded()
		return g, nil
	}
	boundary := params["boundary"]
	if boundary == "" || strings.Count(ct, "boundary") != 1 {
		return nil, errUncheckable // PHP finds "boundary" anywhere in the header: which one it takes is its own
	}
	g.multipart(boundary)
	return g, nil
}

// asciiCompatible tells whether a charset writes "_method" and "=" as
// ASCII does.
func asciiCompatible(cs string) bool {
	cs = strings.ToLower(strings.Trim(cs, `"' `))
	switch {
	case cs == "utf-8", cs == "utf8", cs == "us-ascii", cs == "ascii", cs == "latin1",
		strings.HasPrefix(cs, "iso-8859-"), strings.HasPrefix(cs, "windows-125"):
		return true
	}
	return false
}

// urlencoded reads the body as name=value pairs.
func (g *formGuard) urlencoded() {
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
	g.end = func() {
		if inName && name.Is() {
			g.found()
		}
	}
}

// multipart reads the body as parts, each named by its Content-Disposition
// (as Go, PHP and Rack read it) or its Content-ID (Rack).
func (g *formGuard) multipart(boundary string) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer pr.Close()
		mr := multipart.NewReader(pr, boundary)
		for {
			part, err := mr.NextRawPart()
			if err == io.EOF {
				// After the close delimiter: whitespace only, or PHP
				// may read more parts there.
				if rest, _ := io.ReadAll(pr); len(bytes.TrimSpace(rest)) > 0 {
					g.found()
				}
				return
			}
			if err != nil {
				g.found() // what Go cannot read, PHP may: not checked, not forwarded
				_, _ = io.Copy(io.Discard, pr)
				return
			}
			if partNamesMethod(part) {
				g.found()
			}
			if _, err := io.Copy(io.Discard, part); err != nil {
				g.found()
				_, _ = io.Copy(io.Discard, pr)
				return
			}
		}
	}()
	g.scan = func(p []byte) { _, _ = pw.Write(p) }
	var once sync.Once
	g.end = func() {
		once.Do(func() { _ = pw.Close() })
		<-done
	}
}

// partNamesMethod tells whether any reading of a part's names is _method:
// Go's, every name= in its Content-Disposition quoted either way (PHP,
// Rack's last match), and its Content-ID (Rack).
func partNamesMethod(part *multipart.Part) bool {
	if methodoverride.IsParam(part.FormName()) || methodoverride.IsParam(strings.TrimSpace(part.Header.Get("Content-Id"))) {
		return true
	}
	disp := part.Header.Get("Content-Disposition")
	low := strings.ToLower(disp)
	for i := strings.Index(low, "name="); i >= 0; {
		v := disp[i+len("name="):]
		if v != "" && (v[0] == '"' || v[0] == '\'') {
			if end := strings.IndexByte(v[1:], v[0]); end >= 0 {
				v = v[1 : end+1]
			} else {
				v = v[1:]
			}
		} else if end := strings.IndexAny(v, "; \t"); end >= 0 {
			v = v[:end]
		}
		if methodoverride.IsParam(v) {
			return true
		}
		next := strings.Index(low[i+1:], "name=")
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

func (g *formGuard) found() {
	g.mu.Lock()
	g.hit = true
	g.mu.Unlock()
}

// refused tells whether the body was refused for a _method in it.
func (g *formGuard) refused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hit
}

// stop ends the reading for a verdict, whatever is left of the body: the
// proxy's transport does not always read a body to its end (an upstream
// that answers first, or is down), and does not close it.
func (g *formGuard) stop() { g.end() }

func (g *formGuard) Read(p []byte) (int, error) {
	for {
		if g.refused() {
			g.end() // the parser, if any, stops here
			g.finalErr, g.out, g.held = errBodyOverride, nil, nil
		}
		if len(g.out) > 0 {
			n := copy(p, g.out)
			g.out = g.out[n:]
			return n, nil
		}
		if g.finalErr != nil {
			return 0, g.finalErr
		}
		buf := make([]byte, 32<<10)
		n, err := g.body.Read(buf)
		if n > 0 {
			g.scan(buf[:n])
			g.out, g.held = g.held, bytes.Clone(buf[:n])
		}
		switch {
		case err == io.EOF:
			g.end()
			if !g.refused() {
				g.out, g.held, g.finalErr = append(g.out, g.held...), nil, io.EOF
			}
		case err != nil:
			g.end()
			g.finalErr, g.out, g.held = err, nil, nil // nothing held back goes on after a failed read
		}
	}
}

func (g *formGuard) Close() error { return g.body.Close() }
