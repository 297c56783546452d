package vault

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/testlog"
)

// jwtToken makes a token shaped like a JWT whose payload is claims.
func jwtToken(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2lnbmF0dXJl"
}

// writeKubeconfig writes a kubeconfig whose user has token.
func writeKubeconfig(t *testing.T, path, token string) {
	t.Helper()
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://api.example:6443"}}]
users: [{name: u, user: {token: "` + token + `"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A kubeconfig whose token is a JWT of one hour expires with it: the vault
// reads the kubeconfig again before then, in the background, and picks up
// the token it has been rewritten with.
func TestKubeconfigJWTIsReadAgainBeforeItsExp(t *testing.T) {
	v, clk := testVault(t, Options{})
	v.core.jitter = func(int64) int64 { return 0 }
	path := filepath.Join(t.TempDir(), "kubeconfig")
	exp := epoch.Add(time.Hour)
	first := jwtToken(fmt.Sprintf(`{"sub":"robot","exp":%d}`, exp.Unix()))
	writeKubeconfig(t, path, first)
	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path}), login.ID("kubeconfig"))
	c := mustSelect(t, v)
	if c.Info.Token != first || !c.Info.Expiration.Equal(exp) {
		t.Fatalf("credential expiring %v, want the token's exp %v", c.Info.Expiration, exp)
	}
	waitedBefore := v.waits.waited.Load()

	second := jwtToken(fmt.Sprintf(`{"sub":"robot","exp":%d}`, exp.Add(time.Hour).Unix()))
	writeKubeconfig(t, path, second)
	// Usable for 3590 s (10 s leeway); refreshed when a tenth of that,
	// 359 s, is left.
	clk.SetTime(epoch.Add(3590*time.Second - 359*time.Second - time.Millisecond))
	settled(t, v, clk)
	if got := mustSelect(t, v).Info.Token; got != first {
		t.Fatal("the kubeconfig was read again before the refresh was due")
	}
	clk.Step(time.Millisecond)
	settled(t, v, clk)
	if got := mustSelect(t, v); got.Info.Token != second || !got.Info.Expiration.Equal(exp.Add(time.Hour)) {
		t.Errorf("after the refresh, Select() = %v, want the rewritten token and its exp", got)
	}
	if got := v.waits.waited.Load() - waitedBefore; got != 0 {
		t.Errorf("%d callers waited for the refresh, want none", got)
	}
}

// A JWT whose exp is absent, garbage or beyond any clock does not make the
// vault refresh in a loop, nor refuse the token.
func TestKubeconfigJWTWithOddExpServes(t *testing.T) {
	for name, claims := range map[string]string{
		"absent":  `{"sub":"robot"}`,
		"garbage": `{"exp":"soon"}`,
		"huge":    `{"exp":1e300}`,
		"far":     fmt.Sprintf(`{"exp":%d}`, int64(1)<<39), // the year 19392
	} {
		t.Run(name, func(t *testing.T) {
			v, clk := testVault(t, Options{})
			path := filepath.Join(t.TempDir(), "kubeconfig")
			token := jwtToken(claims)
			writeKubeconfig(t, path, token)
			var calls atomic.Int64
			kubeconfig := piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path})
			v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
				calls.Add(1)
				return kubeconfig(ctx)
			}, login.ID("kubeconfig"))
			if c := mustSelect(t, v); c.Info.Token != token {
				t.Fatalf("Select() = %v, want the kubeconfig's token", c)
			}
			for range 10 {
				clk.Step(time.Minute)
				settled(t, v, clk)
				mustSelect(t, v)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("the kubeconfig was read %d times in 10 min, want once", n)
			}
		})
	}
}

// A JWT whose exp has passed when the kubeconfig is read, or comes within
// the refresh's reach, is read again at the handler's backoff, not in a
// loop; at every verbosity, the log never shows the token.
func TestKubeconfigJWTExpiringSoonIsNoStorm(t *testing.T) {
	for name, exp := range map[string]time.Time{
		"past":    epoch.Add(-time.Hour),
		"in 1 s":  epoch.Add(time.Second),
		"in 11 s": epoch.Add(11 * time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			var logs testlog.Buffer
			v, clk := testVault(t, Options{Logger: logs.Logger(9)})
			path := filepath.Join(t.TempDir(), "kubeconfig")
			token := jwtToken(fmt.Sprintf(`{"sub":"S3CR3T-subject","exp":%d}`, exp.Unix()))
			writeKubeconfig(t, path, token)
			var calls atomic.Int64
			kubeconfig := piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path})
			v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
				calls.Add(1)
				return kubeconfig(ctx)
			}, login.ID("kubeconfig"))
			for range 600 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				_, _ = v.Select(ctx) // a caller every second
				cancel()
				clk.Step(time.Second)
				settled(t, v, clk)
			}
			// The backoff (1 s doubling to 1 min): 16 logins in 10 min.
			if n := calls.Load(); n > 20 {
				t.Errorf("the kubeconfig was read %d times in 10 min, want at the backoff's pace (about 16)", n)
			}
			if out := logs.String(); strings.Contains(out, token) || strings.Contains(out, "S3CR3T") {
				t.Error("the log shows the token")
			}
		})
	}
}
