package eks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/peers"
)

// refreshing is the context the vault gives a handler when it refreshes a
// credential before expiry: every login below is one.
var refreshing = login.WithReason(context.Background(), login.Reason{Kind: login.Refresh})

// counted is a login handler and the processes each of its logins starts:
// handlers.Exec starts one per login, the plugin itself none (strace -f
// shows aws-iam-authenticator's clones are all threads), eks.Login none.
type counted struct {
	login     login.Handler
	processes int
}

// The cost of one EKS token, made by eks.Login in this process or by the
// aws-iam-authenticator binary that handlers.Exec runs, with the same
// static keys and no role (no request leaves either: the token is a
// presigned URL): time, memory and CPU per login, the plugin's CPU counted
// as this process's children's. Run with AUTHVAULT_PEERS set:
//
//	AUTHVAULT_PEERS=$(bash hack/peers.sh) go -C cloud/eks test -run '^$' -bench BenchmarkLogin -benchmem
func BenchmarkLogin(b *testing.B) {
	s := newSTSStub(b)
	for _, bm := range []struct {
		name  string
		login func(b *testing.B) counted
	}{
		{"native", func(*testing.B) counted {
			return counted{eks.Login(s.options(s.staticConfig(testKeyID, testSecret, ""))), 0}
		}},
		{"plugin", func(b *testing.B) counted { return counted{handlers.Exec(pluginExec(b, testCluster)), 1} }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			h := bm.login(b)
			b.ReportAllocs()
			cpu := peers.CPUTime(b)
			b.ResetTimer()
			for range b.N {
				if _, err := h.login(refreshing); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(peers.CPUTime(b)-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/login")
			b.ReportMetric(float64(h.processes), "processes/login")
			if h.processes > 0 {
				b.ReportMetric(peers.ChildMaxRSS(b), "plugin-max-RSS-MiB")
			}
		})
	}
}

// fleetSize is the fleet of BenchmarkThousandEKSClusters.
const fleetSize = 1000

// eksLoginsPerHour is how often the vault logs in to one EKS cluster: an
// EKS token expires 14 min after signing (eks.Login's Expiration, and
// aws-iam-authenticator's expirationTimestamp), so it is usable for 830 s
// (the vault's default Leeway is 10 s), and the vault refreshes it when a
// tenth of that is left (83 s), moved earlier by up to half of that at
// random (20.75 s on average): every 726.25 s, 4.96 times an hour.
const eksLoginsPerHour = 3600 / (830 - 83 - 83.0/4)

// A thousand EKS clusters, a handler each (one per cluster name), each
// logging in once: one rotation of the fleet, natively and through the
// aws-iam-authenticator binary. It reports the CPU-seconds and processes a
// rotation takes, and what they come to in an hour of the vault's
// refreshes (eksLoginsPerHour each), with cpu-cores the CPU-seconds per
// second: the share of a core the fleet's logins keep busy. Run once:
//
//	AUTHVAULT_PEERS=$(bash hack/peers.sh) go -C cloud/eks test -run '^$' -bench BenchmarkThousandEKSClusters -benchtime 1x
func BenchmarkThousandEKSClusters(b *testing.B) {
	s := newSTSStub(b)
	cfg := s.staticConfig(testKeyID, testSecret, "")
	for _, bm := range []struct {
		name  string
		login func(b *testing.B, cluster string) counted
	}{
		{"native", func(_ *testing.B, cluster string) counted {
			opts := s.options(cfg)
			opts.Cluster = cluster
			return counted{eks.Login(opts), 0}
		}},
		{"plugin", func(b *testing.B, cluster string) counted { return counted{handlers.Exec(pluginExec(b, cluster)), 1} }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			fleet := make([]counted, fleetSize)
			for i := range fleet {
				fleet[i] = bm.login(b, fmt.Sprintf("cluster-%04d", i))
			}
			b.ReportAllocs()
			cpu := peers.CPUTime(b)
			processes := 0
			b.ResetTimer()
			for range b.N {
				for _, h := range fleet {
					if _, err := h.login(refreshing); err != nil {
						b.Fatal(err)
					}
					processes += h.processes
				}
			}
			b.StopTimer()
			perRotation := (peers.CPUTime(b) - cpu).Seconds() / float64(b.N)
			processesPerRotation := float64(processes) / float64(b.N)
			b.ReportMetric(perRotation, "cpu-s/rotation")
			b.ReportMetric(processesPerRotation, "processes/rotation")
			b.ReportMetric(perRotation*eksLoginsPerHour, "cpu-s/hour")
			b.ReportMetric(processesPerRotation*eksLoginsPerHour, "processes/hour")
			b.ReportMetric(perRotation*eksLoginsPerHour/3600, "cpu-cores")
		})
	}
}
