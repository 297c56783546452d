package piggyback_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// kubeconfigFor writes a kubeconfig with one token user for server.
func kubeconfigFor(t *testing.T, path, server, token string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	piggyback.WriteFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: %q}}]
`, server, token))
}

// The fallback table: which default handler wins for each combination of
// --kubeconfig, $KUBECONFIG, in-cluster files and ~/.kube/config — the order
// of controller-runtime's config.GetConfig.
func TestFallbackOrder(t *testing.T) {
	for combo := range 16 {
		flagSet, envSet, inCluster, homeSet := combo&8 != 0, combo&4 != 0, combo&2 != 0, combo&1 != 0
		want := ""
		switch {
		case flagSet || envSet:
			want = piggyback.IDExplicitKubeconfig
		case inCluster:
			want = piggyback.IDServiceAccount
		case homeSet:
			want = piggyback.IDHomeKubeconfig
		}
		name := fmt.Sprintf("flag=%t,env=%t,incluster=%t,home=%t", flagSet, envSet, inCluster, homeSet)
		t.Run(name, func(t *testing.T) {
			home := piggyback.Isolate(t)
			dir := t.TempDir()
			if flagSet {
				kubeconfigFor(t, filepath.Join(dir, "flag"), "https://flag.example", "t")
				piggyback.SetFlag(t, filepath.Join(dir, "flag"))
			}
			if envSet {
				kubeconfigFor(t, filepath.Join(dir, "env"), "https://env.example", "t")
				t.Setenv("KUBECONFIG", filepath.Join(dir, "env"))
			}
			if inCluster {
				piggyback.MountServiceAccount(t, "10.96.0.1", true)
			}
			if homeSet {
				kubeconfigFor(t, filepath.Join(home, ".kube", "config"), "https://home.example", "t")
			}

			var logs testlog.Buffer
			v := vault.New(vault.Options{Logger: logs.Logger(0)})
			defer v.Close()
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
			defer cancel()
			cred, err := v.Select(ctx)
			if want == "" {
				if err == nil {
					t.Fatalf("Select() = %v with no source at all, want a LoginError", cred)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Every source present logs in; the vault waits for none but the
			// first. Wait until all have, then look at the winner.
			deadline := time.Now().Add(testwait.Hang)
			for cred.Handler != want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
				cred, _ = v.Select(ctx)
			}
			if cred.Handler != want {
				t.Errorf("winner = %q, want %q", cred.Handler, want)
			}
			if flagSet && cred.Info.Server != "https://flag.example" {
				t.Errorf("server = %s, want the flag's over $KUBECONFIG", cred.Info.Server)
			}
			if !strings.Contains(logs.String(), "using a fallback") || !strings.Contains(logs.String(), want) {
				t.Errorf("logs do not say which fallback won:\n%s", logs.String())
			}
		})
	}
}
