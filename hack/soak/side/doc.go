// Package side is one side of the soak: a process of its own (the soak's
// binary with SOAK_ROLE=authvault or client-go) that runs an operator's
// parts against the harness's hub until the harness stops it, and writes
// what its callers saw (wire.Record, one a line) on its standard output.
//
// # Two sides, one workload
//
// Both sides run the same workload; only how they get their configs
// differs (plumbing):
//
//   - authvault: a vault for the hub whose handlers are the exec plugin
//     and the token file, a fleet from the hub's kubeconfig Secrets and
//     ClusterProfiles, and addonauth in front of the addon;
//   - client-go: the plugin as a rest.Config's ExecProvider, a clientset
//     rebuilt from each Secret and profile as it changes, and
//     controller-runtime's metrics filter (TokenReview and
//     SubjectAccessReview) in front of the addon.
//
// The workload: CRUD workers on the side's ConfigMaps, a watch on them,
// an exec stream every 10 s on a Pod no node runs (the API server's
// "does not have a host assigned" is the success), a read of each fleet
// cluster every 5 s, three addon callers calling once a second with
// TokenRequest tokens, and examples/operator's annotator in a
// controller-runtime manager with leader election, started again when it
// stops. About 30 to 40 requests a second in all: a soak, not a stress
// test.
//
// # Failures
//
// Every operation that fails, but for one the end of the run cut short,
// is a wire.Failure, its error classified: what the API server answered
// first (unauthorized, forbidden, server, timeout), then what the
// connection met (tls, timeout, refused), "no-cluster" for a fleet
// cluster the side had and has no more, "leader-lost" for a manager that
// stopped after it led. Messages are the callers' errors, cut to 300
// bytes; none quotes a credential.
//
// # Samples
//
// Every SampleEvery, a wire.Sample of the process: heap in use,
// goroutines, descriptors, its own established TCP connections (its
// sockets' inodes in /proc/self/net/tcp{,6}: the network namespace holds
// the harness's and the other side's too), the series of
// controller-runtime's registry, the lines of its log file (every logger
// of the process writes there, at the default level), the vaults' login
// attempts (authvault; counted on through a fleet cluster's series that
// leave and come back), and what succeeded so far.
package side
