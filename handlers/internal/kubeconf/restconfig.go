package kubeconf

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// FromREST maps cfg to a credential; proxyURL and namespace come from a
// kubeconfig, which knows them as strings. Token, basic auth, client
// certificate and CA map to fields (a token that is a JWT expires at its
// exp, see TokenExpiry); a token file and an exec provider go to
// plugins; whatever only client-go can do (an auth provider, WrapTransport,
// a custom Transport, Dial, a Proxy function, impersonation) keeps client-go's
// own round tripper as the credential's Transport.
func FromREST(ctx context.Context, cfg *rest.Config, proxyURL, namespace string, plugins Plugins) (*login.ConnectionInfo, error) {
	u, err := serverURL(cfg)
	if err != nil {
		return nil, login.Permanent(err)
	}
	if err := insecureWithCA(cfg); err != nil {
		return nil, login.Permanent(err)
	}
	info := login.ConnectionInfo{
		Server:           u.String(),
		DefaultNamespace: namespace,
		ProxyURL:         proxyURL,
	}
	if onlyClientGo(cfg, proxyURL) {
		return clientGoTransport(ctx, cfg, info, plugins)
	}

	tls := cfg.TLSClientConfig
	info.Insecure, info.TLSServerName = tls.Insecure, tls.ServerName
	// client-go prefers data to a file when it has both; one of each here.
	info.CAData, info.CAPath = dataOrFile(tls.CAData, tls.CAFile)
	info.CertificateData, info.CertificatePath = dataOrFile(tls.CertData, tls.CertFile)
	info.PrivateKeyData, info.PrivateKeyPath = dataOrFile(tls.KeyData, tls.KeyFile)

	switch {
	case cfg.BearerTokenFile != "":
		return plugins.TokenFile(ctx, cfg.BearerTokenFile, info)
	case cfg.BearerToken != "":
		info.Token = cfg.BearerToken
		// A JWT expires at its exp: the vault reads the kubeconfig again
		// before then, as it would a plugin's credential.
		info.Expiration, _ = TokenExpiry(cfg.BearerToken)
	case execRuns(cfg):
		return plugins.Exec(ctx, *cfg.ExecProvider, info, cfg.DisableCompression)
	case cfg.Username != "" || cfg.Password != "":
		info.Username, info.Password = cfg.Username, cfg.Password
	}
	return &info, nil
}

// execRuns follows client-go's precedence: its exec authenticator steps
// aside when the config has a token (or token file), a username or a
// client certificate with its key, and the plugin never runs.
func execRuns(cfg *rest.Config) bool {
	tls := cfg.TLSClientConfig
	hasCert := (len(tls.CertData) > 0 || tls.CertFile != "") && (len(tls.KeyData) > 0 || tls.KeyFile != "")
	return cfg.ExecProvider != nil && cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.Username == "" && !hasCert
}

// clientGoTransport is info with client-go's own round tripper for cfg. An
// exec plugin that a native login serves is not left to client-go, which
// would run it (with impersonation, say): the native login's credential
// takes its place in a copy of cfg, with the endpoint and CA the login
// chose, and its expiry is the credential's.
func clientGoTransport(ctx context.Context, cfg *rest.Config, info login.ConnectionInfo, plugins Plugins) (*login.ConnectionInfo, error) {
	native := execRuns(cfg) && plugins.Native != nil && plugins.Native(*cfg.ExecProvider)
	if execRuns(cfg) && !native && plugins.Allowed != nil {
		// client-go would refuse it at every request instead.
		if err := plugins.Allowed(*cfg.ExecProvider); err != nil {
			return nil, err
		}
	}
	if native {
		cluster := info
		cluster.Insecure, cluster.TLSServerName = cfg.Insecure, cfg.ServerName
		cluster.CAData, cluster.CAPath = dataOrFile(cfg.CAData, cfg.CAFile)
		got, err := plugins.Exec(ctx, *cfg.ExecProvider, cluster, cfg.DisableCompression)
		if err != nil || got == nil {
			return nil, err
		}
		cfg = rest.CopyConfig(cfg)
		cfg.ExecProvider = nil
		cfg.Host, cfg.BearerToken = got.Server, got.Token
		cfg.Insecure, cfg.CAData, cfg.CAFile = got.Insecure, got.CAData, got.CAPath
		cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = got.CertificateData, got.PrivateKeyData, "", ""
		info.Server, info.Expiration = got.Server, got.Expiration
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, login.Permanent(fmt.Errorf("client-go transport for %s: %w", redact.Value(info.Server), err))
	}
	info.Transport, info.ProxyURL = rt, ""
	return &info, nil
}

// insecureWithCA refuses what client-go's transport refuses: skipping
// verification while naming a CA to verify with.
func insecureWithCA(cfg *rest.Config) error {
	if cfg.Insecure && (len(cfg.CAData) > 0 || cfg.CAFile != "") {
		return errors.New("insecure-skip-tls-verify is set together with a CA (certificate-authority or certificate-authority-data), " +
			"which client-go refuses: keep one of them")
	}
	return nil
}

// serverURL is cfg's server as client-go resolves it, refused when it is
// plain http that cfg.Host does not spell out. client-go takes a Host
// without a scheme ("10.0.0.1:6443") for plain http — clientcmd always,
// rest.Config when it has no CA, client certificate or Insecure — and the
// credential would go out in clear; the vault sends a credential over http
// only to a server that says http://. A server with user info is refused,
// as the vault refuses it. Errors quote the server with its user info
// redacted.
func serverURL(cfg *rest.Config) (*url.URL, error) {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if u.Scheme == "http" && !strings.HasPrefix(strings.ToLower(cfg.Host), "http://") {
		return nil, fmt.Errorf("server %q has no scheme: client-go would take it for plain http and the credential would go out in clear; "+
			"write https:// (or http:// to mean plain http)", redact.Value(cfg.Host))
	}
	if u.User != nil {
		// The vault refuses it too, but as a login that fails again at
		// every backoff step: this is final until the source changes.
		return nil, fmt.Errorf("server %q carries user info; use a username and password", redact.Value(cfg.Host))
	}
	return u, nil
}

// onlyClientGo tells whether cfg does something only client-go's own
// transport can do.
func onlyClientGo(cfg *rest.Config, proxyURL string) bool {
	return cfg.AuthProvider != nil || cfg.WrapTransport != nil || cfg.Transport != nil || cfg.Dial != nil ||
		(cfg.Proxy != nil && proxyURL == "") || cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" ||
		len(cfg.Impersonate.Groups) > 0 || len(cfg.Impersonate.Extra) > 0 || len(cfg.NextProtos) > 0
}

func dataOrFile(data []byte, file string) ([]byte, string) {
	if len(data) > 0 {
		return data, ""
	}
	return nil, file
}
