package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"testing"
)

func TestValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"https://h:6443/x", "https://h:6443/x"},
		{"http://u:p@h", "http://[redacted]@h"},
		{`http://u:p"s s@h:1`, "http://[redacted]@h:1"},
		{"u:p s@h", "[redacted]@h"},
		{"//u:p\n@h", "//[redacted]@h"},
		{"http://u:p@h/a@b", "http://[redacted]@h/a@b"},
	} {
		if got := Value(tc.in); got != tc.want {
			t.Errorf("Value(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"https://h:6443", "https://h:6443"},
		{"https://h/x?y=1#z", "https://h/x?y=1#z"},
		{"http://u:p@h", "http://[redacted]@h"},
		{"http://u:p@h:3128/path?q=1", "http://[redacted]@h:3128/path?q=1"},
		{"http://u@h", "http://[redacted]@h"},
		{"https://TOKEN@h", "https://[redacted]@h"},
		{"u:p@h", "[redacted]@h"},
		{"u:p@h:3128", "[redacted]@h:3128"},
		{"//u:p@h", "//[redacted]@h"},
		{"http://u:p@h:bad", "http://[redacted]@h:bad"},
		{"ftp!://u:p@h", "[redacted]@h"}, // not a scheme: all hidden
		{"u:p//x@h", "[redacted]@h"},
		{"http://u:p//x@h", "http://[redacted]@h"},
		{"socks5://u:p@[::1]:1080", "socks5://[redacted]@[::1]:1080"},
		{"http://u:p@ss@h", "http://[redacted]@h"},      // @ in the password
		{"http://u:p%40ss@h", "http://[redacted]@h"},    // escaped @
		{"http://u:p:q@h", "http://[redacted]@h"},       // : in the password
		{"http://u:p/ss@h", "http://[redacted]@h"},      // / in the password: hidden all the same
		{"http://u:p?ss@h", "http://[redacted]@h"},      // ? in the password
		{"http://u:p#ss@h", "http://[redacted]@h"},      // # in the password
		{"http://u:p@h/a@b", "http://[redacted]@h/a@b"}, // @ in the path after a user info
		{"http://@h", "http://@h"},                      // empty user info: nothing to hide
		{"(u:p@h)", "([redacted]@h)"},                   // bracketed
		{"<http://u:p@h>", "<http://[redacted]@h>"},     // angle brackets
		{"'u:p@h'", "'[redacted]@h'"},                   // single quotes
		{"proxy=http://u:p@h", "[redacted]@h"},          // in a key=value: generous
		{"a http://u:p@h b https://v:q@g c", "a http://[redacted]@h b https://[redacted]@g c"},
		{"http://u:p@h\nhttp://v:q@g", "http://[redacted]@h\nhttp://[redacted]@g"},
		{`parse "http://u:p@h:bad": invalid port ":bad" after host`, `parse "http://[redacted]@h:bad": invalid port ":bad" after host`},
		{`parse "u:p@h": first path segment in URL cannot contain colon`, `parse "[redacted]@h": first path segment in URL cannot contain colon`},
		{`parse "http://u:p ss@h": invalid character " " in host name`, `parse "http://[redacted]@h": invalid character " " in host name`},
		{`parse "http://u:p\"ss@h": net/url: invalid userinfo`, `parse "http://[redacted]@h": net/url: invalid userinfo`},
		{`server "http://u:p@h" and proxy "//v:q@g"`, `server "http://[redacted]@h" and proxy "//[redacted]@g"`},
		{`{"proxyURL":"http://u:p@h"}`, `{"proxyURL":"http://[redacted]@h"}`},
		{"unterminated \"http://u:p@h", "unterminated \"http://[redacted]@h"},
		{"http://ü:pä@hé", "http://[redacted]@hé"},
		{"mail admin@example.com", "mail [redacted]@example.com"}, // generous, never less
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestURLHidesSecrets runs many shapes of URL, alone (Value) and inside
// the texts url.Parse and fmt make of them (URL), and checks that no secret
// survives and the host stays visible.
func TestURLHidesSecrets(t *testing.T) {
	const user, pass, host = "usr7", "s3cr3t", "proxy.example"
	passwords := []string{pass, pass + "@x", pass + ":x", pass + " x", pass + `"x`, pass + "%20x", pass + "/x", pass + "\nx", pass + "\x00x", pass + "\\x", pass + "'x"}
	forms := []string{"http://%s@%s", "https://%s@%s:3128", "%s@%s", "//%s@%s", "http://%s@%s:bad", "bad scheme://%s@%s", "ht tp://%s@%s", "socks5://%s@%s:1080/x?y#z", "%s@%s/path@v1", "http://%s@%s/path@v1"}
	for _, pw := range passwords {
		for _, userinfo := range []string{user + ":" + pw, pw} {
			for _, form := range forms {
				raw := fmt.Sprintf(form, userinfo, host)
				check := func(what, got string) {
					t.Helper()
					for _, secret := range []string{pass, user} {
						if strings.Contains(got, secret) {
							t.Errorf("%s = %q, reveals %q", what, got, secret)
						}
					}
					if !strings.Contains(got, host) {
						t.Errorf("%s = %q, want the host %q visible", what, got, host)
					}
				}
				check(fmt.Sprintf("Value(%q)", raw), Value(raw))
				texts := []string{fmt.Sprintf("%q", raw), fmt.Sprintf("proxy %q: %v", raw, errors.New("x"))}
				if _, err := url.Parse(raw); err != nil {
					texts = append(texts, err.Error(), fmt.Errorf("login: %w", err).Error())
				}
				// Unquoted, a URL is found when its user info has no raw
				// quote, and no space unless a "//" comes before it.
				if !strings.Contains(pw, `"`) && (strings.Contains(raw, "//") || !strings.ContainsAny(pw, " \n\x00")) {
					texts = append(texts, raw, "proxy "+raw+" failed")
				}
				for _, text := range texts {
					check(fmt.Sprintf("URL(%q)", text), URL(text))
				}
			}
		}
	}
}

// FuzzURL checks that a password of any content, in URLs of every form
// quoted in a text as url.Parse and %q quote them, or alone through Value,
// never survives, and that a text without @ is left alone.
func FuzzURL(f *testing.F) {
	f.Add("s3cr3t", `parse "http://u:p@h:bad": invalid port`)
	f.Add(`p"w @x`, "@@//@")
	f.Add("p/w?#", "//0\x00#@")
	f.Add("00//", "a")
	f.Add("@00#", "a")
	f.Fuzz(func(t *testing.T, pass, text string) {
		if got := URL(text); !strings.Contains(text, "@") && got != text {
			t.Errorf("URL(%q) = %q, changed a text without @", text, got)
		}
		if len(pass) < 4 || strings.Contains("http://usr:@proxy.example:3128", pass) {
			return // too short to tell apart from the rest
		}
		if at := strings.IndexByte(pass, '@'); at >= 0 && strings.ContainsAny(pass[at:], "/?#") {
			return // reads as a user info, a host and a path: documented
		}
		for _, form := range []string{"http://usr:%s@proxy.example:3128", "usr:%s@proxy.example", "//%s@proxy.example"} {
			raw := fmt.Sprintf(form, pass)
			for what, got := range map[string]string{
				"Value": Value(raw),
				"URL":   URL(fmt.Sprintf("proxy %q: failed", raw)),
			} {
				if strings.Contains(got, pass) {
					t.Errorf("%s of %q = %q, reveals the password", what, raw, got)
				}
			}
		}
	})
}

type typedErr struct{ url string }

func (e *typedErr) Error() string { return "fetch " + e.url + ": refused" }

// Format is what a careless library might do: print its fields raw.
func (e *typedErr) Format(f fmt.State, verb rune) { fmt.Fprintf(f, "typedErr{url: %s}", e.url) }

func TestError(t *testing.T) {
	if Error(nil) != nil {
		t.Fatal("Error(nil) != nil")
	}
	const secret = "pw-secret-1"
	_, parseErr := url.Parse(strings.Join([]string{"http://u:", secret, "@h:bad"}, "")) // a bad port, on purpose
	typed := &typedErr{url: "https://u:" + secret + "@h"}
	for name, orig := range map[string]error{
		"url.Parse":  parseErr,
		"wrapped":    fmt.Errorf("login: ProxyURL: %w", parseErr),
		"typed":      typed,
		"joined":     errors.Join(fs.ErrNotExist, errors.New("proxy u:"+secret+"@h")),
		"plain text": errors.New(`server "//u:` + secret + `@h" down`),
	} {
		t.Run(name, func(t *testing.T) {
			err := Error(orig)
			if !errors.Is(err, orig) {
				t.Errorf("errors.Is(Error(err), err) = false")
			}
			asJSON, jerr := json.Marshal(err)
			if jerr != nil {
				t.Fatal(jerr)
			}
			outputs := map[string]string{
				"Error": err.Error(),
				"%v":    fmt.Sprintf("%v", err),
				"%+v":   fmt.Sprintf("%+v", err),
				"%#v":   fmt.Sprintf("%#v", err),
				"%s":    fmt.Sprintf("%s", err),
				"%q":    fmt.Sprintf("%q", err),
				"%x":    fmt.Sprintf("%x", err),
				"%w":    fmt.Errorf("outer: %w", err).Error(),
				"%w+v":  fmt.Sprintf("%+v", fmt.Errorf("outer: %w", err)),
				"json":  string(asJSON),
			}
			for verb, out := range outputs {
				if strings.Contains(out, secret) {
					t.Errorf("%s = %q, reveals the password", verb, out)
				}
				if !strings.Contains(out, Marker) && verb != "%x" {
					t.Errorf("%s = %q, want %q in it", verb, out, Marker)
				}
			}
		})
	}
	// errors.As reaches the original type.
	var te *typedErr
	if !errors.As(Error(fmt.Errorf("x: %w", typed)), &te) || te != typed {
		t.Errorf("errors.As did not find the wrapped *typedErr")
	}
	// Redacting twice changes nothing.
	once := Error(parseErr)
	if twice := Error(once); twice != once {
		t.Errorf("Error(Error(err)) = %v, want the same error back", twice)
	}
	if got, want := Error(errors.New("plain")).Error(), "plain"; got != want {
		t.Errorf("Error(plain).Error() = %q, want %q", got, want)
	}
}
