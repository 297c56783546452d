package redact

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Secrets returns nil for nil, and otherwise an error as Error's whose
// message also has each of secrets replaced by Marker wherever it occurs:
// for an error that may quote back a secret its sender was given, such as
// a server's refusal that echoes the token it refused. It unwraps to err.
func Secrets(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	return &redacted{msg: URL(Mask(err.Error(), secrets...)), err: err}
}

// Mask returns s with each non-empty one of secrets replaced by Marker
// wherever it occurs, the longest first, so that a secret holding another
// is hidden whole. A secret is also hidden in the forms a server quotes it
// back in: percent-encoded (a form body, a query, a path), and escaped in a
// JSON or Go-quoted string.
func Mask(s string, secrets ...string) string {
	var forms []string
	for _, secret := range secrets {
		if secret != "" {
			forms = append(forms, escapedForms(secret)...)
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	for _, form := range slices.Compact(forms) {
		s = strings.ReplaceAll(s, form, Marker)
	}
	return s
}

// escapedForms are secret and the forms it takes when it is escaped.
func escapedForms(secret string) []string {
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret), unquote(strconv.Quote(secret))}
	if b, err := json.Marshal(secret); err == nil {
		forms = append(forms, unquote(string(b)))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(secret) == nil {
		forms = append(forms, unquote(strings.TrimSuffix(b.String(), "\n")))
	}
	return forms
}

// unquote is a quoted string without its quotes.
func unquote(q string) string { return q[1 : len(q)-1] }
