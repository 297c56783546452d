package piggyback_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// twoClusters is the situation of issue 10 with the fallback defaults: a pod
// whose in-cluster ServiceAccount is mounted (cluster) and that is started
// with a kubeconfig whose user is an exec plugin (remote), each cluster a
// real TLS server that accepts any bearer token and records it.
type twoClusters struct {
	cluster, remote *recorder
	kubeconfig      string // the kubeconfig file
}

// newTwoClusters mounts the ServiceAccount of cluster and writes the
// kubeconfig of remote, whose exec user runs the handlers' test plugin
// through a shell script that first runs prelude (a real process each
// login). No kubeconfig is in $HOME.
func newTwoClusters(t *testing.T, prelude, pluginMode string) *twoClusters {
	t.Helper()
	home := piggyback.Isolate(t)
	c := &twoClusters{cluster: newRecorder(t, ""), remote: newRecorder(t, "plugin-token-")}

	// The in-cluster ServiceAccount, pointed at the cluster recorder: its
	// host and port, its CA in place of the one mountServiceAccount made.
	root, _ := piggyback.MountServiceAccount(t, "127.0.0.1", true)
	host, port, _ := strings.Cut(strings.TrimPrefix(c.cluster.srv.URL, "https://"), ":")
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	piggyback.WriteFile(t, filepath.Join(root, "ca.crt"), string(c.cluster.ca.PEM))

	plugin := filepath.Join(home, "plugin.sh")
	script := "#!/bin/sh\n" + prelude + "\nexport PLUGIN_MODE=" + pluginMode + "\nexec " + strconv.Quote(piggyback.PluginPath()) + "\n"
	if err := os.WriteFile(plugin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	c.kubeconfig = filepath.Join(home, "remote.yaml")
	piggyback.WriteFile(t, c.kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: remote
clusters: [{name: remote, cluster: {server: %s, certificate-authority-data: %s}}]
contexts: [{name: remote, context: {cluster: remote, user: plugin-user}}]
users:
- name: plugin-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: %s
      interactiveMode: Never
`, c.remote.srv.URL, base64.StdEncoding.EncodeToString(c.remote.ca.PEM), plugin))
	return c
}

// firstRequest does what an operator's main does with the fallback
// defaults: RESTConfig, then one request to its Host. It returns the
// credential of that first request and how long RESTConfig took.
func (c *twoClusters) firstRequest(t *testing.T, opts vault.Options) (*vault.Credential, time.Duration) {
	t.Helper()
	v := vault.New(opts) // no handler registered: piggyback.Defaults()
	t.Cleanup(v.Close)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	start := time.Now()
	cfg, err := v.RESTConfig(ctx)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := v.Select(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status := getThrough(t, v, cfg.Host+"/api/v1/namespaces"); status != 200 {
		t.Fatalf("GET = %d", status)
	}
	return cred, took
}

// Issue 10, "First login honours priority", with the fallback defaults: a
// fast in-cluster ServiceAccount (priority 20) and a $KUBECONFIG whose exec
// plugin takes 300 ms (priority 30). The first credential, and the first
// request, must be the kubeconfig's: never the in-cluster cluster.
func TestFirstLoginDefaultsSlowKubeconfigPlugin(t *testing.T) {
	t.Run("kubeconfig first", func(t *testing.T) {
		c := newTwoClusters(t, "sleep 0.3", "token")
		t.Setenv("KUBECONFIG", c.kubeconfig)
		cred, took := c.firstRequest(t, vault.Options{})
		if cred.Handler != piggyback.IDExplicitKubeconfig || cred.Info.Server != c.remote.srv.URL {
			t.Errorf("first credential = %v, want the kubeconfig's (the highest priority) for %s", cred, c.remote.srv.URL)
		}
		if took < 300*time.Millisecond {
			t.Errorf("RESTConfig took %v, less than the plugin's 300 ms: it did not wait for the kubeconfig", took)
		}
		if seen := c.cluster.seen(); len(seen) != 0 {
			t.Errorf("the in-cluster server got %d requests, want none: the first request went to the wrong cluster", len(seen))
		}
		if seen := c.remote.seen(); len(seen) != 1 || seen[0] != "Bearer plugin-token-1" {
			t.Errorf("the kubeconfig's server saw %q, want the plugin's token once", seen)
		}
	})

	// The control: the same set-up without the wait serves the in-cluster
	// credential first, so the subtest above fails when the wait is gone
	// (FirstLoginWait: -1) — the plugin really is the slower one.
	t.Run("without the wait the in-cluster server is hit", func(t *testing.T) {
		c := newTwoClusters(t, "sleep 0.3", "token")
		t.Setenv("KUBECONFIG", c.kubeconfig)
		cred, _ := c.firstRequest(t, vault.Options{FirstLoginWait: -1})
		if cred.Handler != piggyback.IDServiceAccount || len(c.cluster.seen()) != 1 {
			t.Errorf("first credential = %v, want the in-cluster one: the set-up does not show issue 10", cred)
		}
	})
}

// The same with a kubeconfig plugin that hangs (--kubeconfig this time):
// the in-cluster credential is handed out once Options.FirstLoginWait has
// passed, not before and not after the plugin's FallbackTimeout (1 min).
func TestFirstLoginDefaultsHangingKubeconfigPlugin(t *testing.T) {
	c := newTwoClusters(t, "", "sleep") // the plugin sleeps a minute
	piggyback.SetFlag(t, c.kubeconfig)
	const wait = 500 * time.Millisecond
	cred, took := c.firstRequest(t, vault.Options{FirstLoginWait: wait})
	if cred.Handler != piggyback.IDServiceAccount || cred.Info.Server != c.cluster.srv.URL {
		t.Errorf("first credential = %v, want the in-cluster one once the kubeconfig's plugin hung for FirstLoginWait", cred)
	}
	// Not before FirstLoginWait; after it, what a busy machine adds, far
	// less than the plugin's FallbackTimeout (1 min).
	if took < wait || took > wait+testwait.Hang {
		t.Errorf("RESTConfig took %v, want FirstLoginWait (%v) and little more", took, wait)
	}
	if len(c.cluster.seen()) != 1 || len(c.remote.seen()) != 0 {
		t.Errorf("requests: in-cluster %d, kubeconfig %d; want 1 and 0", len(c.cluster.seen()), len(c.remote.seen()))
	}
}
