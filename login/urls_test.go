package login

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// urlForms are a Server or ProxyURL with user info in every shape: with a
// scheme, without one, scheme-relative, with a bad port, with a bad scheme,
// with characters url.Parse refuses.
func urlForms(user, pass, host string) []string {
	ui := user + ":" + pass
	return []string{
		"http://" + ui + "@" + host + ":3128",
		"https://" + ui + "@" + host,
		ui + "@" + host + ":3128",
		ui + "@" + host,
		"//" + ui + "@" + host,
		"http://" + ui + "@" + host + ":bad",
		"//" + ui + "@" + host + ":bad",
		"ht!tp://" + ui + "@" + host,
		"ftp://" + ui + "@" + host,
		"http://" + ui + "@" + host + "/path@v1",
		"http://" + user + ":" + pass + "@x@" + host, // @ in the password
		"http://" + user + ":" + pass + "/x@" + host, // / in the password
		"http://" + user + ":" + pass + " x@" + host, // space in the password
		"http://" + pass + "@" + host,                // user info that is a token
		"http://" + ui + "@" + host + ":%zz",
	}
}

// printed is every way a ConnectionInfo gets printed.
func printed(t *testing.T, ci ConnectionInfo) map[string]string {
	t.Helper()
	var logged bytes.Buffer
	funcr.New(func(prefix, args string) { logged.WriteString(prefix + args) }, funcr.Options{}).Info("credential", "info", ci, "ptr", &ci)
	asJSON, err := json.Marshal(ci)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{
		"String": ci.String(), "GoString": ci.GoString(),
		"%v": fmt.Sprintf("%v", ci), "%+v": fmt.Sprintf("%+v", ci), "%#v": fmt.Sprintf("%#v", ci),
		"%s": fmt.Sprintf("%s", ci), "%q": fmt.Sprintf("%q", ci), "&%+v": fmt.Sprintf("%+v", &ci),
		"json": string(asJSON), "logr": logged.String(),
	}
	if err := ci.Validate(); err != nil {
		out["Validate"] = err.Error()
		out["Validate %+v"] = fmt.Sprintf("%+v", err)
	}
	return out
}

func TestPrintingRedactsURLUserInfo(t *testing.T) {
	const user, pass = "usr-7q", "pw-9x8y7z"
	for _, field := range []string{"Server", "ProxyURL"} {
		for _, raw := range urlForms(user, pass, "proxy.example") {
			ci := ConnectionInfo{Server: "https://api.example", Token: "t"}
			if field == "Server" {
				ci.Server = raw
			} else {
				ci.ProxyURL = raw
			}
			for how, out := range printed(t, ci) {
				for _, secret := range []string{pass, user} {
					if strings.Contains(out, secret) {
						t.Errorf("%s %q: %s = %s, reveals %q", field, raw, how, out, secret)
					}
				}
			}
			if field == "ProxyURL" && !strings.Contains(ci.String(), "proxy.example") {
				t.Errorf("String() = %s, want the proxy's host visible", ci.String())
			}
		}
	}
}
