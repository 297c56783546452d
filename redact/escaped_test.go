package redact

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// A server that quotes back what it was sent quotes it in the form it was
// sent or answers in: a form body or a query percent-encodes a secret's
// '/', '+' and '=' (an AWS secret key, a base64 token), a JSON answer
// escapes its quotes, backslashes and '<', '>', '&' (a password). Mask
// hides those forms too.
func TestMaskHidesEscapedForms(t *testing.T) {
	const secret = `wJalr/XUtn+FEMI=K7<&>"\q`
	jsonForm, err := json.Marshal(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, echo string }{
		{"raw", "token " + secret + " refused"},
		{"a form", "400: you sent client_secret=" + url.QueryEscape(secret) + "&grant_type=client_credentials"},
		{"a path", "404: no route for /v1/keys/" + url.PathEscape(secret)},
		{"JSON", `{"error":"invalid_client","you_sent":` + string(jsonForm) + `}`},
		{"JSON without HTML escapes", `{"you_sent":"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(secret) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Mask(tc.echo, secret)
			if !strings.Contains(got, Marker) {
				t.Errorf("Mask(%q) = %q: the secret is not hidden", tc.echo, got)
			}
			for _, part := range []string{"wJalr", "FEMI", "K7"} {
				if strings.Contains(got, part) {
					t.Errorf("Mask(%q) = %q: it still holds %q of the secret", tc.echo, got, part)
				}
			}
		})
	}
}
