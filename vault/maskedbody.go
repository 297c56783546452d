package vault

import (
	"io"
	"strings"

	"github.com/authvault/authvault/redact"
)

// maskedBody is the body of an answer that refused an upgrade, as the
// caller reads it, with the refused credential's secrets masked: client-go
// puts all of it in its error text. It reads the answer on its first Read,
// as client-go would, never before: the vault adds no wait of its own.
type maskedBody struct {
	body    io.ReadCloser
	secrets []string
	masked  *strings.Reader // nil until the first Read
	err     error           // what ended the reading of body, nil for its end
}

func (b *maskedBody) Read(p []byte) (int, error) {
	if b.masked == nil {
		data, err := io.ReadAll(b.body)
		b.masked, b.err = strings.NewReader(redact.Mask(string(data), b.secrets...)), err
	}
	n, err := b.masked.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *maskedBody) Close() error { return b.body.Close() }
