// Package flux puts Flux's remote-cluster authentication (fluxcd/pkg/auth,
// what a Kustomization's spec.kubeConfig.configMapRef uses) beside
// authvault's Flux source (fleet.WatchFlux, federation.Login) on one real
// hub and one real member, and holds nothing but tests: a module of its
// own, under hack/peers as the other peers, so that Flux's requirements
// (newer Kubernetes libraries, three cloud SDKs) never reach the library's
// go.mod. It is left out of hack/all.work, whose modules must agree on
// every dependency's version.
//
// # What is compared
//
// The ported cases read one ConfigMap on the hub through both sides: Flux's
// utils.GetRESTConfig with a controller-runtime client, and a fleet's
// WatchFlux. Each side's outcome is asserted: the TokenRequests it made on
// the hub (ServiceAccount and audiences), the user the member saw, and
// whether it listed the member's namespaces. Where the two differ, the
// case says why; most differences are refusals of ours on purpose (a
// ConfigMap is written by someone else: its token goes only where it says,
// over https, for a ServiceAccount of its own namespace).
//
// For aws, gcp and azure, our side is the cloud modules' providers
// (eks.Flux, gke.Flux, aks.Flux), and both sides exchange the hub's token
// at local stand-ins of AWS STS, Google's STS and IAM Credentials API, and
// Entra ID, which check it as the cloud does (testkit/hubtrust) and answer
// in the cloud's wire format. Flux's providers reach the clouds' public
// hosts through a CONNECT proxy to the stand-ins (auth.WithProxyURL), ours
// the stand-ins' address; the hub itself is the member, its authenticator
// asking the stand-ins about the tokens they issued.
//
// # The benchmark
//
// BenchmarkCloudRotation counts, per new usable config of a cloud member,
// the TokenRequests on the hub and the requests to each cloud's stand-in.
//
// BenchmarkRotation measures, per token rotation followed by one
// reconcile, what arrives at the hub (TokenRequests, other requests) and
// at the member (relists of a controller-runtime cache, other requests,
// connections), the process's allocations, and the time to a usable config:
// Flux builds a config per reconcile, whose round tripper asks for a token
// at every request (unless given its token cache); authvault keeps one
// config, and its cache, while the token under it rotates.
//
//	make bench-flux
//
// # Running
//
// The tests start one hub and one member for the whole module (envtest's
// binaries: KUBEBUILDER_ASSETS as hack/envtest.sh prints it):
//
//	KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) go -C hack/peers/flux test -race ./...
package flux
