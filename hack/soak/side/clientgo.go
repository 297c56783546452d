package side

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/authvault/authvault/hack/soak/wire"
)

// clientGoSide is the same as authvaultSide, the way controllers do it
// today: client-go's exec plugin for the hub (client-go takes one way to
// authenticate, so the token file is not read), a clientset rebuilt from
// each Secret and profile as it changes, and controller-runtime's metrics
// filter in front of the addon.
func clientGoSide(_ context.Context, cfg wire.Config, log logr.Logger) (*plumbing, error) {
	providers, err := readProviders(cfg.ProviderFile)
	if err != nil {
		return nil, err
	}
	hub := &rest.Config{
		Host:            cfg.Server,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cfg.CAFile},
		ExecProvider: &clientcmdapi.ExecConfig{
			Command: cfg.PluginCommand, Env: pluginEnv(cfg.PluginEnv), APIVersion: execAPIVersion,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		},
	}
	requests := &inFlight{}
	hub.WrapTransport = requests.wrap
	cs, err := kubernetes.NewForConfig(hub)
	if err != nil {
		return nil, fmt.Errorf("soak: a client for the hub: %w", err)
	}
	dyn, err := dynamic.NewForConfig(hub)
	if err != nil {
		return nil, fmt.Errorf("soak: a client for the hub: %w", err)
	}
	httpClient, err := rest.HTTPClientFor(hub)
	if err != nil {
		return nil, fmt.Errorf("soak: a client for the hub: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(hub, httpClient)
	if err != nil {
		return nil, fmt.Errorf("soak: the addon's filter: %w", err)
	}
	f := newClientGoFleet(log.WithName("fleet"), providers)
	return &plumbing{
		hub:   hub,
		fleet: f,
		front: func(upstream http.Handler) (http.Handler, error) {
			return filter(log.WithName("addon"), upstream)
		},
		authorize: true,
		run: func(ctx context.Context) {
			f.run(ctx, cs, dyn, cfg.SecretsNamespace, cfg.ProfilesNamespace)
		},
		close: func() {
			// A manager's event broadcaster sends its last events (its
			// lease released) after its Start has returned.
			requests.waitQuiet(time.Second, 10*time.Second)
			closeIdle(hub)
			f.closeIdle()
		},
	}, nil
}

// closeIdle closes the idle connections of cfg's transport: client-go
// caches transports for the life of the process, and with them their
// connections' goroutines, which would outlive Run.
func closeIdle(cfg *rest.Config) {
	if rt, err := rest.TransportFor(cfg); err == nil {
		utilnet.CloseIdleConnectionsFor(rt)
	}
}

// inFlight tracks the requests of a transport, for a shutdown that waits
// for the last of them, as a vault's Shutdown does.
type inFlight struct {
	mu   sync.Mutex // guards n, last
	n    int
	last time.Time // the end of the last request
}

func (f *inFlight) wrap(rt http.RoundTripper) http.RoundTripper {
	return &counted{rt: rt, f: f}
}

// counted is a transport whose requests an inFlight counts; it unwraps as
// client-go's own wrappers do, so that its idle connections can be closed.
//
// A request is in flight until its response's body is closed, not only
// until the transport below returns: client-go's exec wrapper, which sits
// outside this one (rest.Config adds it after WrapTransport), answers a 401
// by running the plugin before it hands the response on. Counted only to
// RoundTrip's return, that run was outside every request, and a shutdown
// that found 1 s of quiet returned while it went on: beside busy cores a
// run of the plugin (this side's own binary) takes seconds, and the
// goroutine waiting on it outlived Run (TestRevokedPluginTokens).
type counted struct {
	rt http.RoundTripper
	f  *inFlight
}

func (c *counted) RoundTrip(r *http.Request) (*http.Response, error) {
	c.f.begin()
	resp, err := c.rt.RoundTrip(r)
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgrade's connection is the stream's, which ends with the
		// operation that opened it; its body must stay what it is.
		c.f.end()
		return resp, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, end: sync.OnceFunc(c.f.end)}
	return resp, nil
}

func (f *inFlight) begin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
}

func (f *inFlight) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	f.last = time.Now()
}

// countedBody ends its request's count when it is closed, once.
type countedBody struct {
	io.ReadCloser
	end func()
}

func (b *countedBody) Close() error {
	defer b.end()
	return b.ReadCloser.Close()
}

func (c *counted) WrappedRoundTripper() http.RoundTripper { return c.rt }

// waitQuiet returns once no request has been in flight for quiet, or
// after bound.
func (f *inFlight) waitQuiet(quiet, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		idle := f.n == 0 && time.Since(f.last) >= quiet
		f.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
