package vault

import (
	"context"

	"k8s.io/client-go/rest"
)

// RESTConfig waits for the first usable credential and returns a client-go
// config whose every request goes through the vault: its Host is that
// credential's server and its Transport is the vault's, with no TLS or auth
// fields of its own (client-go refuses those beside a Transport).
//
// Use it for client-go clientsets, controller-runtime clients and managers
// (leader election included, which copies it). Settings made on it that do
// not authenticate — user agent, impersonation, QPS, burst, timeout, content
// type — work as usual.
func (v *Vault) RESTConfig(ctx context.Context) (*rest.Config, error) {
	cred, err := v.Select(ctx)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:          cred.Info.Server,
		Transport:     v.Transport(),
		WrapTransport: v.wrapStreaming,
		Proxy:         streamProxy,
		// A TLS field that client-go accepts beside a Transport, so that
		// spdy.RoundTripperFor makes a TLS config the vault fills in for
		// each upgrade; the protocols are those every client-go transport
		// offers.
		TLSClientConfig: rest.TLSClientConfig{NextProtos: []string{"h2", "http/1.1"}},
	}, nil
}

// DefaultNamespace is what Namespace returns when no credential names one,
// as for kubeconfig contexts.
const DefaultNamespace = "default"

// Namespace is the DefaultNamespace of the credentials the vault hands out
// now: the first one of the highest priority that names one, else "default".
func (v *Vault) Namespace() string {
	s := v.snap.Load()
	if s.held {
		return DefaultNamespace
	}
	for _, group := range s.groups {
		for _, c := range group {
			if c.Info.DefaultNamespace != "" {
				return c.Info.DefaultNamespace
			}
		}
	}
	return DefaultNamespace
}
