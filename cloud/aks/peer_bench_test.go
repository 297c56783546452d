package aks_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/peers"
)

// The cost of one AKS token in workload identity mode, fetched from the
// stand-in Entra ID by aks.Login in this process or by the kubelogin
// binary that handlers.Exec runs: time, memory and CPU per login (the
// plugin's counted as this process's children's; the stand-in runs in this
// process, so its share of each login is in both). Every login is a
// refresh, which aks.Login serves with a new token, never the one it keeps
// for first logins, and the plugin runs with no token cached (withHome):
// the stand-in counts one issued per login. handlers.Exec
// starts one process per login (strace -f shows kubelogin's clones are all
// threads), aks.Login none. Run with AUTHVAULT_PEERS set:
//
//	AUTHVAULT_PEERS=$(bash hack/peers.sh) go -C cloud/aks test -run '^$' -bench BenchmarkLogin -benchmem
func BenchmarkLogin(b *testing.B) {
	e := newEntra(b)
	refreshing := login.WithReason(context.Background(), login.Reason{Kind: login.Refresh})
	for _, bm := range []struct {
		name      string
		login     func(b *testing.B) login.Handler
		processes int
	}{
		{"native", func(b *testing.B) login.Handler {
			setWorkloadEnv(b)
			return aks.LoginWith(opts(nil), time.Now, e.newDefault)
		}, 0},
		{"plugin", func(b *testing.B) login.Handler {
			// Each run in a new home, where kubelogin has no token
			// cached (see withHome).
			cfg, homes, runs := kubeloginExec(b, e), b.TempDir(), 0
			return func(ctx context.Context) (*login.ConnectionInfo, error) {
				runs++
				home := filepath.Join(homes, strconv.Itoa(runs))
				if err := os.Mkdir(home, 0o700); err != nil {
					return nil, err
				}
				return handlers.Exec(withHome(cfg, home))(ctx)
			}
		}, 1},
	} {
		b.Run(bm.name, func(b *testing.B) {
			h := bm.login(b)
			b.ReportAllocs()
			issued, cpu := e.issued.Load(), peers.CPUTime(b)
			b.ResetTimer()
			for range b.N {
				if _, err := h(refreshing); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if n := e.issued.Load() - issued; n != int64(b.N) {
				b.Fatalf("%d logins, %d tokens issued: a login did not fetch its own", b.N, n)
			}
			b.ReportMetric(float64(peers.CPUTime(b)-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/login")
			b.ReportMetric(float64(bm.processes), "processes/login")
			if bm.processes > 0 {
				b.ReportMetric(peers.ChildMaxRSS(b), "plugin-max-RSS-MiB")
			}
		})
	}
}
