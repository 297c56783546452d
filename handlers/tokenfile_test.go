package handlers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/authvault/authvault/internal/clockctx"
	"github.com/authvault/authvault/login"
)

// jwt makes an unsigned token whose payload is claims.
func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2lnbmF0dXJl"
}

func writeToken(t *testing.T, path, token string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTokenFile(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ctx := clockctx.With(context.Background(), testingclock.NewFakePassiveClock(now))
	path := filepath.Join(t.TempDir(), "token")
	base := login.ConnectionInfo{Server: "https://kubernetes.default.svc", CAPath: "/ca.crt", DefaultNamespace: "ops"}
	h := TokenFile(path, base)

	tests := []struct {
		name, content, wantToken string
		wantExpiration           time.Time
	}{
		{"opaque token, whitespace trimmed", "  opaque-token \n", "opaque-token", time.Time{}},
		{"JWT expiring before a minute", jwt(fmt.Sprintf(`{"exp":%d}`, now.Add(30*time.Second).Unix())), "", now.Add(30 * time.Second)},
		{"JWT expiring later", jwt(fmt.Sprintf(`{"exp":%d}`, now.Add(time.Hour).Unix())), "", now.Add(time.Hour)},
		{"JWT without exp", jwt(`{"sub":"system:serviceaccount:ops:op"}`), "", time.Time{}},
		{"JWT with a bad payload", "a.%%%.c", "a.%%%.c", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeToken(t, path, tt.content)
			info, err := h(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.wantToken
			if want == "" {
				want = tt.content
			}
			if info.Token != want || !info.Expiration.Equal(tt.wantExpiration) || info.RefreshAfter != RereadAfter {
				t.Errorf("credential token %q expiring %v, read again after %v; want %q expiring %v, read again after %v",
					info.Token, info.Expiration, info.RefreshAfter, want, tt.wantExpiration, RereadAfter)
			}
			if info.Server != base.Server || info.CAPath != base.CAPath || info.DefaultNamespace != "ops" {
				t.Errorf("credential = %v, want the base's server, CA and namespace", info)
			}
		})
	}
}

// What base says of expiry and rereading stands when it is sooner than the
// token's exp and RereadAfter.
func TestTokenFileKeepsSoonerBase(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "token")
	writeToken(t, path, jwt(fmt.Sprintf(`{"exp":%d}`, now.Add(time.Hour).Unix())))
	for _, tc := range []struct {
		name       string
		base       login.ConnectionInfo
		wantExp    time.Time
		wantReread time.Duration
	}{
		{"sooner", login.ConnectionInfo{Server: "https://a", Expiration: now.Add(time.Minute), RefreshAfter: 10 * time.Second}, now.Add(time.Minute), 10 * time.Second},
		{"later", login.ConnectionInfo{Server: "https://a", Expiration: now.Add(2 * time.Hour), RefreshAfter: time.Hour}, now.Add(time.Hour), RereadAfter},
	} {
		info, err := TokenFile(path, tc.base)(context.Background())
		if err != nil || !info.Expiration.Equal(tc.wantExp) || info.RefreshAfter != tc.wantReread {
			t.Errorf("%s: credential %v, %v; want it expiring %v, read again after %v", tc.name, info, err, tc.wantExp, tc.wantReread)
		}
	}
}

func TestTokenFileErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeToken(t, empty, " \n")
	missing := filepath.Join(dir, "missing")
	for _, path := range []string{empty, missing} {
		_, err := TokenFile(path, login.ConnectionInfo{Server: "https://a"})(context.Background())
		if err == nil || !strings.Contains(err.Error(), path) || !strings.HasPrefix(err.Error(), "handlers: token file") {
			t.Errorf("TokenFile(%s) error = %v, want one naming the path", path, err)
		}
	}
	_, err := TokenFile(missing, login.ConnectionInfo{})(context.Background())
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error = %v, want it to wrap os.ErrNotExist", err)
	}
}

// A static token that is a JWT expires at its exp, unless the info given
// says sooner; any other token expires as the info says.
func TestStaticJWTExpires(t *testing.T) {
	exp := time.Date(2030, 1, 1, 13, 0, 0, 0, time.UTC)
	token := jwt(fmt.Sprintf(`{"exp":%d}`, exp.Unix()))
	sooner := exp.Add(-time.Minute)
	for _, tc := range []struct {
		name string
		info login.ConnectionInfo
		want time.Time
	}{
		{"JWT", login.ConnectionInfo{Server: "https://a", Token: token}, exp},
		{"JWT, sooner expiration given", login.ConnectionInfo{Server: "https://a", Token: token, Expiration: sooner}, sooner},
		{"JWT, later expiration given", login.ConnectionInfo{Server: "https://a", Token: token, Expiration: exp.Add(time.Hour)}, exp},
		{"opaque", login.ConnectionInfo{Server: "https://a", Token: "t"}, time.Time{}},
		{"JWT with a garbage exp", login.ConnectionInfo{Server: "https://a", Token: jwt(`{"exp":[]}`)}, time.Time{}},
	} {
		info, err := Static(tc.info)(context.Background())
		if err != nil || !info.Expiration.Equal(tc.want) || info.Token != tc.info.Token {
			t.Errorf("%s: Static() = %v, %v; want it expiring %v", tc.name, info, err, tc.want)
		}
	}
}

func TestStatic(t *testing.T) {
	info := login.ConnectionInfo{Server: "https://a", Token: "t"}
	h := Static(info)
	a, _ := h(context.Background())
	b, _ := h(context.Background())
	if a == b || a.Server != info.Server || a.Token != info.Token || b.Token != info.Token {
		t.Errorf("Static() gave %p and %p, want equal copies", a, b)
	}
	a.Token = "changed"
	if c, _ := h(context.Background()); c.Token != "t" {
		t.Error("changing one result changed the next")
	}
}
