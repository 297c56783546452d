// Package pemdata reads the PEM fields of credentials and kubeconfig files,
// which hold PEM or, as kubeconfig files carry it, base64 of PEM.
package pemdata

import (
	"bytes"
	"encoding/base64"
	"encoding/pem"
	"errors"
)

// Decode returns data as PEM: data that already is PEM is returned as it
// is, data that is base64 of PEM (as kubeconfig files hold it) is decoded.
// Anything else is an error. Empty data is returned as it is.
func Decode(data []byte) ([]byte, error) {
	if len(data) == 0 {
		return data, nil
	}
	if isPEM(data) {
		return data, nil
	}
	// The decoder skips line breaks, so wrapped base64 decodes too.
	trimmed := bytes.TrimSpace(data)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		decoded := make([]byte, enc.DecodedLen(len(trimmed)))
		n, err := enc.Decode(decoded, trimmed)
		if err == nil && isPEM(decoded[:n]) {
			return decoded[:n], nil
		}
	}
	return nil, ErrNotPEM
}

// ErrNotPEM is Decode's error for data that is neither.
var ErrNotPEM = errors.New("neither PEM nor base64 of PEM")

// isPEM tells whether data holds at least one PEM block.
func isPEM(data []byte) bool {
	block, _ := pem.Decode(data)
	return block != nil
}
