// Package testkit is the home of the test support packages that authvault's
// own modules share: a real kube-apiserver with a token issuer of its own
// (testcluster), the rotation workload and its figures (rotation),
// certificates and JWTs (testpki), the test credential plugin (testplugin),
// a logger and a writer a test reads (testlog), a TCP proxy that a test closes to cut a client from its server (tcpproxy), the peers' plugin binaries
// and what they cost (peers), the harness of the native logins' fuzz targets
// (nativefuzz), the start of a fake client's watch (fakewatch), what a
// vault calls a login handler in its errors, logs and metrics (names), the
// objects under deploy/ (manifests), how long a test waits for what it
// expects (testwait), a headless Chromium driven by chromedp (browser), and
// a real hub whose ServiceAccount tokens are checked as a cloud's STS
// checks them (hubtrust).
//
// They are exported, not internal, because the cloud logins and the rotation
// demo are modules of their own: Go's internal rule would let them import
// internal/ by path, but a later root release could change such a package and
// break a published module's tests. They follow the same compatibility
// promise as the rest of the module, but they are made for authvault's tests:
// they call t.Fatal, read the environment of make test (KUBEBUILDER_ASSETS,
// AUTHVAULT_PEERS, AUTHVAULT_CHROMIUM) and favour what those tests need.
//
// testcluster is also how make cluster starts its API server, and can serve
// users who test an operator's rotation against a real kube-apiserver:
// tokens issued, expired and revoked at will, as the API server sees them.
//
// Nothing a library user imports depends on these packages.
package testkit
