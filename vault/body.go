package vault

import (
	"io"
	"net/http"
	"sync/atomic"
)

// trackBody wraps a response body of t so that t.finished runs once, when
// the body is read to its end (or fails) or closed, whichever comes first.
// The body of a protocol upgrade (101) is also an io.Writer, and stays one.
// It holds t itself rather than a callback: one allocation per response.
func trackBody(body io.ReadCloser, t *pooled) io.ReadCloser {
	if w, ok := body.(io.ReadWriteCloser); ok {
		return &trackedUpgrade{trackedBody{ReadCloser: body, owner: t}, w}
	}
	return &trackedBody{ReadCloser: body, owner: t}
}

type trackedBody struct {
	io.ReadCloser
	owner *pooled
	ended atomic.Bool
}

func (b *trackedBody) end() {
	if b.ended.CompareAndSwap(false, true) {
		b.owner.finished()
	}
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

type trackedUpgrade struct {
	trackedBody
	w io.Writer
}

func (b *trackedUpgrade) Write(p []byte) (int, error) { return b.w.Write(p) }

func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// discard drains a little of a response that is not returned, so that its
// connection can serve the retry, and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil { // a credential's own Transport may break the RoundTripper contract
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}
