package vault

import (
	"io"
	"sync"
)

// trackBody wraps a response body so that done runs once, when the body is
// read to its end (or fails) or closed, whichever comes first. The body of
// a protocol upgrade (101) is also an io.Writer, and stays one.
func trackBody(body io.ReadCloser, done func()) io.ReadCloser {
	t := &trackedBody{ReadCloser: body, done: done}
	if w, ok := body.(io.Writer); ok {
		return &trackedUpgrade{trackedBody: t, w: w}
	}
	return t
}

type trackedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

type trackedUpgrade struct {
	*trackedBody
	w io.Writer
}

func (b *trackedUpgrade) Write(p []byte) (int, error) { return b.w.Write(p) }
