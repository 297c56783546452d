package vault

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// A hub's vault with no handler of its own, on a machine with a kubeconfig
// and no in-cluster service account: the fallbacks as they ship. The
// kubeconfig serves; the service account that is not there is said at
// V(1) only, and the vault never says it has no usable credential.
func TestAFallbackNotNeededIsNotNews(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	writeKubeconfig(t, kubeconfig, "hub-token")
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")

	var logs testlog.Buffer
	v := New(Options{Logger: logs.Logger(1)})
	defer v.Close()
	if c := mustSelect(t, v); c.Info.Server != "https://api.example:6443" {
		t.Fatalf("Select() = %v, want the kubeconfig's", c)
	}
	eventually(t, "the fallbacks' logins to end", func() bool { return idle(v) && strings.Contains(logs.String(), "gave no credential") })

	var quiet int
	for _, line := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(line, "no usable credential"):
			t.Errorf("said while the kubeconfig serves: %s", line)
		case !strings.Contains(line, `"msg"="login gave no credential"`):
		case strings.Contains(line, `"level"=1`):
			quiet++
		default:
			t.Errorf("a fallback that was not needed, at INFO: %s", line)
		}
	}
	if quiet == 0 {
		t.Errorf("no V(1) line for the missing service account:\n%s", logs.String())
	}
}

// When every handler gives nothing, the vault says so once at INFO, and
// not again at each round of logins that gives nothing again.
func TestNothingAtAllIsSaidOnce(t *testing.T) {
	var logs testlog.Buffer
	var asked atomic.Int32
	nothing := func(context.Context) (*login.ConnectionInfo, error) { asked.Add(1); return nil, nil }
	v, clk := testVault(t, Options{FirstLoginWait: -1, Logger: logs.Logger(1), Fallback: []login.Registration{
		{Handler: nothing, Options: []login.Option{login.ID("kubeconfig")}},
		{Handler: nothing, Options: []login.Option{login.ID("serviceaccount")}},
	}})
	for round := int32(1); round <= 3; round++ {
		// Each round comes once the last one's backoff has passed, for a
		// caller.
		testwait.For(t, "a round of logins", func() bool {
			if asked.Load() >= 2*round && idle(v) {
				return true
			}
			clk.Step(time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			_, _ = v.Select(ctx) // a caller's demand: fallbacks log in for one
			return false
		})
	}

	var said int
	for _, line := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(line, `"msg"="no usable credential"`) && strings.Contains(line, `"level"=0`):
			said++ // (a caller refused for it is at V(1))
			if !strings.Contains(line, `"action"=`) || !strings.Contains(line, `handler \"serviceaccount\" gave nothing`) {
				t.Errorf("want it to say what each handler gave, and what to do: %s", line)
			}
		case strings.Contains(line, "gave no credential") && !strings.Contains(line, `"level"=1`):
			t.Errorf("a fallback's nothing at INFO: %s", line)
		}
	}
	if said != 1 {
		t.Errorf("\"no usable credential\" said %d times over three rounds, want once:\n%s", said, logs.String())
	}
}
