package kubeconf

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "s3cret-token-0123456789"

// Load names what is wrong and never repeats the content, in whatever form
// the parser quotes it.
func TestLoadQuotesNoContent(t *testing.T) {
	for _, data := range []string{
		"",
		"   \n",
		"users:\n- name: u\n  user: {{" + secret + ": x}: y}\n",
		"users: [" + secret + "\n",
		"users:\n- name: u\n  user:\n    token: [" + secret + "]\n",
		"users:\n- name: u\n  user:\n    client-key-data: " + secret + "!!\n",
		"a: *" + secret + "\n",
		"\t" + secret + ": x",
	} {
		_, err := Load([]byte(data))
		if err == nil {
			t.Errorf("Load(%q) gave no error", data)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Load(%q) = %v: it repeats the content", data, err)
		}
	}
	if _, err := Load([]byte("apiVersion: v1\nkind: Config\n")); err != nil {
		t.Errorf("a valid, empty kubeconfig: %v", err)
	}
}

// Connection with Inline refuses entries that name files, before it reads
// any; it runs no plugin it is not given.
func TestConnectionInline(t *testing.T) {
	cfg, err := Load([]byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://c.example", certificate-authority: /etc/hostname}}]
users: [{name: u, user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`))
	if err != nil {
		t.Fatal(err)
	}
	called := false
	plugins := Plugins{
		TokenFile: func(context.Context, string, login.ConnectionInfo) (*login.ConnectionInfo, error) {
			called = true
			return nil, nil
		},
	}
	_, err = Connection(context.Background(), Source{Config: cfg, Where: "Secret a/b", Inline: true, Policy: clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyDenyAll}}, plugins)
	var perm *login.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "tokenFile names a file of this machine") || !strings.Contains(err.Error(), "certificate-authority names a file") {
		t.Errorf("got %v", err)
	}
	if called {
		t.Error("the token file was read")
	}
}

// unsignedJWT makes a token shaped like a JWT whose payload is claims.
func unsignedJWT(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2lnbmF0dXJl"
}

// A kubeconfig's bearer token that is a JWT with an exp claim expires then;
// any other token never does, and a claim that is no time is no error.
func TestConnectionTokenExpiry(t *testing.T) {
	exp := time.Date(2030, 1, 1, 13, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, token string
		want        time.Time
	}{
		{"JWT of one hour", unsignedJWT(fmt.Sprintf(`{"sub":"robot","exp":%d}`, exp.Unix())), exp},
		{"JWT long expired", unsignedJWT(`{"exp":1000000000}`), time.Unix(1000000000, 0)},
		{"opaque token", "opaque-0123456789", time.Time{}},
		{"JWT without exp", unsignedJWT(`{"sub":"robot"}`), time.Time{}},
		{"exp a string", unsignedJWT(`{"exp":"tomorrow"}`), time.Time{}},
		{"exp null", unsignedJWT(`{"exp":null}`), time.Time{}},
		{"exp negative", unsignedJWT(`{"exp":-5}`), time.Time{}},
		{"exp huge", unsignedJWT(`{"exp":1e300}`), time.Time{}},
		{"exp beyond int64", unsignedJWT(`{"exp":99999999999999999999}`), time.Time{}},
		{"payload not JSON", "eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln", time.Time{}},
		{"payload not base64", "a.%%%.c", time.Time{}},
		{"four parts", "a.b.c.d", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load([]byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://c.example"}}]
users: [{name: u, user: {token: "` + tc.token + `"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`))
			if err != nil {
				t.Fatal(err)
			}
			info, err := Connection(context.Background(), Source{Config: cfg, Where: "Secret a/b", Inline: true}, Plugins{})
			if err != nil {
				t.Fatal(err)
			}
			if info.Token != tc.token || !info.Expiration.Equal(tc.want) {
				t.Errorf("credential expiring %v (token kept: %v), want %v", info.Expiration, info.Token == tc.token, tc.want)
			}
		})
	}
}
