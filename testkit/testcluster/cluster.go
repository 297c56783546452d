package testcluster

import (
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/authvault/authvault/login"
)

// ReviewCacheTTL is how long the API server trusts a successful token
// review: its webhook cache is set to this, and the token cache in front of
// every token authenticator keeps successes 10 s whatever the flag says
// (measured: a token revoked 1 s after its issue met its first 401 10.2 s
// after). A revoked token is rejected at the latest this long after its
// revocation.
const ReviewCacheTTL = 10 * time.Second

// Cluster is a running kube-apiserver and etcd, and the token issuer its
// webhook authenticator asks.
type Cluster struct {
	Env    *envtest.Environment
	Admin  *rest.Config // envtest's own admin, by client certificate
	Issuer *Issuer
	Server string // the API server's URL
	CAData []byte // the CA of its serving certificate
	// FrontProxyCA signs the client certificate the API server's
	// aggregation layer presents to an APIService's backend (PEM); the
	// API server publishes it, and the requestheader settings, in ConfigMap
	// kube-system/extension-apiserver-authentication.
	FrontProxyCA []byte

	webhook  *httptest.Server
	dir      string
	auditLog string
	saKeys   serviceAccountKeys // set by keepServiceAccountKey
}

// Options are what StartWith starts beside the defaults.
type Options struct {
	// IssuerDiscovery serves the API server's ServiceAccount issuer
	// discovery (/.well-known/openid-configuration and /openid/v1/jwks) to
	// anonymous callers, on those two paths only, as a hub whose tokens a
	// Member trusts must (StartMember), and the health checks. Anonymous
	// requests to any other path get 401.
	IssuerDiscovery bool
}

// Start starts the issuer and the control plane. It needs KUBEBUILDER_ASSETS
// to name the directory of kube-apiserver and etcd: setup-envtest's, in
// an operator's repository (docs/testing.md), or the one hack/envtest.sh
// prints, in authvault's.
func Start() (*Cluster, error) { return StartWith(Options{}) }

// StartWith is Start with opts.
func StartWith(opts Options) (*Cluster, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("testcluster: KUBEBUILDER_ASSETS is not set: it names the directory of kube-apiserver and etcd. " +
			"In your repository: export KUBEBUILDER_ASSETS=$(go run sigs.k8s.io/controller-runtime/tools/setup-envtest@v0.25.3 use -p path 1.36.x) (docs/testing.md). " +
			"In authvault's: make test sets it, or export KUBEBUILDER_ASSETS=$(bash hack/envtest.sh)")
	}
	dir, err := os.MkdirTemp("", "authvault-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, webhook: httptest.NewUnstartedServer(nil)}
	c.Issuer = newIssuer(c.webhook)
	c.webhook.StartTLS()

	webhookConfig := filepath.Join(dir, "token-webhook.yaml")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.webhook.Certificate().Raw})
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: webhook
clusters:
- name: issuer
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: apiserver
contexts:
- name: webhook
  context: {cluster: issuer, user: apiserver}
`, c.webhook.URL, base64.StdEncoding.EncodeToString(ca))
	if err := os.WriteFile(webhookConfig, []byte(kubeconfig), 0o600); err != nil {
		c.cleanup()
		return nil, err
	}

	c.Env = &envtest.Environment{}
	// envtest's defaults, 20 s for etcd or the API server to be ready or to
	// stop, are about what a kube-apiserver takes on two busy cores beside
	// the test binaries (make test-loaded): a start that slow is no hang.
	// These bounds serve RestartAPIServer and RotateServingCA too; envtest's
	// variables still set them.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		c.Env.ControlPlaneStartTimeout = 2 * time.Minute
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
		c.Env.ControlPlaneStopTimeout = time.Minute
	}
	api := c.Env.ControlPlane.GetAPIServer()
	// A directory of ours keeps the serving certificate across a restart
	// (envtest makes new ones in a directory it allocated itself).
	api.CertDir = filepath.Join(dir, "apiserver")
	if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
		c.cleanup()
		return nil, err
	}
	frontProxy, frontProxyCA, err := frontProxyFlags(dir)
	if err != nil {
		c.cleanup()
		return nil, err
	}
	c.FrontProxyCA = frontProxyCA
	for flag, value := range frontProxy {
		api.Configure().Set(flag, value)
	}
	audit, auditLog, err := auditFlags(dir)
	if err != nil {
		c.cleanup()
		return nil, err
	}
	c.auditLog = auditLog
	for flag, value := range audit {
		api.Configure().Set(flag, value)
	}
	if opts.IssuerDiscovery {
		config := filepath.Join(dir, "authentication-config.yaml")
		if err := os.WriteFile(config, []byte(discoveryAuthentication), 0o600); err != nil {
			c.cleanup()
			return nil, err
		}
		api.Configure().Set("authentication-config", config)
		// The discovery document's jwks_uri is on the advertised address:
		// the loopback one the API server listens on, not the host's.
		api.Configure().Set("advertise-address", "127.0.0.1")
	}
	api.Configure().
		Set("authentication-token-webhook-config-file", webhookConfig).
		Set("authentication-token-webhook-version", "v1").
		Set("authentication-token-webhook-cache-ttl", ReviewCacheTTL.String())
	if c.Admin, err = c.Env.Start(); err != nil {
		c.cleanup()
		return nil, fmt.Errorf("testcluster: starting the control plane: %w", err)
	}
	c.Server, c.CAData = c.Admin.Host, c.Admin.CAData
	if u, _, err := rest.DefaultServerUrlFor(c.Admin); err == nil {
		c.Server = u.String()
	}
	if opts.IssuerDiscovery {
		if err := c.bindDiscovery(); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// RestartAPIServer stops the API server and starts it again over the same
// etcd, port and serving certificate, after down has passed.
func (c *Cluster) RestartAPIServer(down time.Duration) error {
	api := c.Env.ControlPlane.GetAPIServer()
	if err := api.Stop(); err != nil {
		return fmt.Errorf("testcluster: stopping the API server: %w", err)
	}
	time.Sleep(down)
	if err := api.Start(); err != nil {
		return fmt.Errorf("testcluster: starting the API server again: %w", err)
	}
	return nil
}

// RestartAPIServerWithIssuers restarts the API server as RestartAPIServer
// does, with these service-account issuers from then on: the first signs
// new tokens and names itself in the discovery document, tokens of every
// one are accepted (the documented way to change the issuer: the new one,
// then the old one). The signing key stays.
func (c *Cluster) RestartAPIServerWithIssuers(down time.Duration, issuers ...string) error {
	c.Env.ControlPlane.GetAPIServer().Configure().Set("service-account-issuer", issuers...)
	return c.RestartAPIServer(down)
}

// RotateServingCA stops the API server, removes its serving certificate so
// that it starts again, after down, with one from a new CA, and returns that
// CA (PEM); Token uses it from then on. The client CA and admin credentials
// may change with it: use the vault's own credentials afterwards. The
// service-account signing key stays, as it does when a cluster's serving
// CA rotates: tokens it signed before are still good.
func (c *Cluster) RotateServingCA(down time.Duration) ([]byte, error) {
	api := c.Env.ControlPlane.GetAPIServer()
	if err := c.keepServiceAccountKey(); err != nil {
		return nil, err
	}
	if err := api.Stop(); err != nil {
		return nil, fmt.Errorf("testcluster: stopping the API server: %w", err)
	}
	for _, f := range []string{"apiserver.crt", "apiserver.key"} {
		if err := os.Remove(filepath.Join(api.CertDir, f)); err != nil {
			return nil, fmt.Errorf("testcluster: removing the serving certificate: %w", err)
		}
	}
	time.Sleep(down)
	if err := api.Start(); err != nil {
		return nil, fmt.Errorf("testcluster: starting the API server with a new CA: %w", err)
	}
	c.CAData = api.SecureServing.CA
	return c.CAData, nil
}

// keepServiceAccountKey points the API server at a copy of its
// service-account key pair, made once: envtest writes a new pair beside
// every serving certificate it makes, which would end every token it
// signed before a rotation (the soak's addon callers met 401s until their
// next TokenRequest).
func (c *Cluster) keepServiceAccountKey() error {
	api := c.Env.ControlPlane.GetAPIServer()
	kept := filepath.Join(c.dir, "service-account")
	if _, err := os.Stat(kept); err == nil {
		return nil
	}
	if err := os.MkdirAll(kept, 0o700); err != nil {
		return err
	}
	for flag, file := range map[string]string{"service-account-key-file": "sa-signer.crt", "service-account-signing-key-file": "sa-signer.key"} {
		data, err := os.ReadFile(filepath.Join(api.CertDir, file))
		if err != nil {
			return fmt.Errorf("testcluster: keeping the service-account key: %w", err)
		}
		if err := os.WriteFile(filepath.Join(kept, file), data, 0o600); err != nil {
			return err
		}
		api.Configure().Set(flag, filepath.Join(kept, file))
	}
	c.saKeys = serviceAccountKeys{verify: []string{filepath.Join(kept, "sa-signer.crt")}, signing: filepath.Join(kept, "sa-signer.key")}
	return nil
}

// Token is a credential for the cluster with tok.
func (c *Cluster) Token(tok string) login.ConnectionInfo {
	return login.ConnectionInfo{Server: c.Server, CAData: c.CAData, Token: tok}
}

// Stop stops the control plane and the issuer.
func (c *Cluster) Stop() error {
	err := c.Env.Stop()
	c.cleanup()
	return err
}

func (c *Cluster) cleanup() {
	c.webhook.Close()
	os.RemoveAll(c.dir)
}
