package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// credKind makes credentials of one kind for the suite's cluster: good ones
// it authenticates, and bad ones it answers 401 at their first use.
type credKind struct {
	name      string
	good, bad func() *login.ConnectionInfo
}

// tokenKind: tokens of the webhook's issuer; a bad one is revoked before its
// first use, so the API server has no cached review that would accept it.
var tokenKind = credKind{
	name: "token",
	good: func() *login.ConnectionInfo {
		info := cluster.Token(cluster.Issuer.Issue(0))
		return &info
	},
	bad: func() *login.ConnectionInfo {
		tok := cluster.Issuer.Issue(0)
		cluster.Issuer.Revoke(tok)
		info := cluster.Token(tok)
		return &info
	},
}

// certKind: envtest's admin client certificate; a bad one is self-signed,
// which the API server does not trust: the TLS handshake succeeds (it asks
// for a client certificate without requiring a trusted one) and
// authentication answers 401.
var certKind = credKind{
	name: "client certificate",
	good: func() *login.ConnectionInfo {
		certPEM, keyPEM := adminKeyPair()
		return &login.ConnectionInfo{Server: cluster.Server, CAData: cluster.CAData, CertificateData: certPEM, PrivateKeyData: keyPEM}
	},
	bad: func() *login.ConnectionInfo {
		certPEM, keyPEM := untrustedKeyPair()
		return &login.ConnectionInfo{Server: cluster.Server, CAData: cluster.CAData, CertificateData: certPEM, PrivateKeyData: keyPEM}
	},
}

// adminKeyPair is cluster.Admin's client certificate and key, as PEM.
func adminKeyPair() (certPEM, keyPEM []byte) {
	certPEM, keyPEM = cluster.Admin.CertData, cluster.Admin.KeyData
	var err error
	if len(certPEM) == 0 {
		certPEM, err = os.ReadFile(cluster.Admin.CertFile)
		Expect(err).NotTo(HaveOccurred())
	}
	if len(keyPEM) == 0 {
		keyPEM, err = os.ReadFile(cluster.Admin.KeyFile)
		Expect(err).NotTo(HaveOccurred())
	}
	return certPEM, keyPEM
}

// untrustedKeyPair is a self-signed client certificate for the user
// system:admin in system:masters, and its key, as PEM: what the API server
// would take for an admin if it trusted its signer.
func untrustedKeyPair() (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "system:admin", Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// script is a login handler that gives a credential of its kind per call:
// a bad one at the calls listed in bad (1 is the first), a good one at the
// others. It keeps what it gave, to tell them apart and to check that no
// secret of theirs shows in an error.
type script struct {
	kind credKind
	bad  []int

	mu    sync.Mutex // guards given
	given []*login.ConnectionInfo
}

func newScript(kind credKind, bad ...int) *script { return &script{kind: kind, bad: bad} }

func (s *script) login(context.Context) (*login.ConnectionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.kind.good()
	if slices.Contains(s.bad, len(s.given)+1) {
		info = s.kind.bad()
	}
	s.given = append(s.given, info)
	return info, nil
}

// calls is how often the handler ran.
func (s *script) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.given)
}

// call is what the handler gave at call n (1 is the first).
func (s *script) call(n int) *login.ConnectionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	Expect(len(s.given)).To(BeNumerically(">=", n), "the handler ran %d times", n)
	return s.given[n-1]
}

// secrets are the tokens and keys the handler gave.
func (s *script) secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, info := range s.given {
		if info.Token != "" {
			out = append(out, info.Token)
		}
		if len(info.PrivateKeyData) > 0 {
			out = append(out, string(info.PrivateKeyData))
		}
	}
	return out
}

// options are the handler's: a short login floor, so that the re-login
// after a 401 comes at once and the specs stay fast.
func (s *script) options() []login.Option {
	return []login.Option{login.ID("script"), login.Backoff(20*time.Millisecond, time.Second)}
}

// vaultFor is a vault with s as its only handler, closed when the spec
// ends, its metrics on reg, and the config it hands out; from a fleet (a
// cluster named hub, the suite's own) when fromFleet is set.
func vaultFor(ctx context.Context, s *script, reg *prometheus.Registry, fromFleet bool) (*vault.Vault, *rest.Config) {
	if fromFleet {
		f := fleet.New(fleet.Options{Registerer: reg})
		DeferCleanup(f.Close)
		Expect(f.Add("hub", s.login, s.options()...)).To(Succeed())
		cfg, err := f.RESTConfig(ctx, "hub")
		Expect(err).NotTo(HaveOccurred())
		return f.Vault("hub"), cfg
	}
	v := vault.New(vault.Options{NoFallback: true, Registerer: reg})
	DeferCleanup(v.Close)
	v.OnLogin(s.login, s.options()...)
	cfg, err := v.RESTConfig(ctx)
	Expect(err).NotTo(HaveOccurred())
	return v, cfg
}

// counter is the sum of reg's counter name over its labels: 0 before it
// was first counted.
func counter(reg *prometheus.Registry, name string) int {
	sum := 0.0
	for _, family := range gather(reg, name) {
		for _, m := range family.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return int(sum)
}
