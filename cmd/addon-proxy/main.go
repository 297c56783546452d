// Command addon-proxy is the addon-authentication sidecar: it listens on
// the pod's address, verifies each caller's bearer token for the audience
// it is given (package addonauth), and forwards the request to the service
// on localhost with the caller's identity in headers and without the token.
//
// It logs in to the API server through a vault with the fallback handlers:
// the pod's ServiceAccount in a cluster, or --kubeconfig. /healthz, /readyz
// and /metrics are served on --ops-listen.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/vault"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "addon-proxy:", err)
		os.Exit(1)
	}
}

func run() error {
	c, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		return err
	}
	if c.version {
		fmt.Println(versionLine(debug.ReadBuildInfo()))
		return nil
	}
	log := zap.New(zap.UseDevMode(false), zap.Level(zapcore.Level(-c.verbosity))).WithName("addon-proxy")
	// k8s.io/apiserver's CA follower and client-go log through klog: in
	// the same JSON lines, under a name of their own.
	klog.SetLogger(log.WithName("k8s"))
	// -v is klog's too, as in Kubernetes components: client-go's V lines.
	var klogV klog.Level
	_ = klogV.Set(strconv.Itoa(c.verbosity)) // 0 to 10, checked by parseFlags
	if weak := insecureCiphers(c.tlsCiphers); len(weak) > 0 {
		log.Info("--tls-cipher-suites names suites crypto/tls counts as insecure", "suites", weak)
	}
	transport, err := upstreamTransport(c, log)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The vault names none of its lines: addon-proxy.authvault tells them
	// from the proxy's own.
	v := vault.New(vault.Options{Logger: log.WithName("authvault"), Registerer: reg})
	defer v.Close()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		return fmt.Errorf("logging in to the API server: %w", err)
	}
	// TokenReviews and SubjectAccessReviews share this rate: client-go's
	// default of 5 made reviews queue behind each other.
	cfg.QPS, cfg.Burst = float32(c.apiQPS), c.apiBurst
	c.auth.Config, c.auth.Logger, c.auth.Registerer = cfg, log, reg
	auth, err := addonauth.New(c.auth)
	if err != nil {
		return err
	}

	// The front proxy's configuration is followed until the servers stop.
	follow, stopFollowing := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() { followed <- auth.Start(follow) }()
	defer func() { stopFollowing(); <-followed }()

	srv := newServer(c.listen, newHandler(auth.Middleware, upstreamHandler(c, transport, log), c.verifyTimeout))
	if c.certFile != "" {
		if srv.TLSConfig, err = servingTLS(c, log); err != nil {
			return err
		}
		if c.auth.FrontProxy != nil {
			// Asked for, not verified here: the middleware verifies the
			// front proxy's, and a caller with another certificate, or
			// none, is a bearer caller.
			srv.TLSConfig.ClientAuth = tls.RequestClientCert
		}
	}

	var ops *http.Server
	if c.opsListen != "0" {
		ops = &http.Server{Addr: c.opsListen, Handler: opsHandler(v, reg), ReadHeaderTimeout: 10 * time.Second}
	}
	log.Info("serving", "listen", c.listen, "upstream", c.upstream.Redacted(), "audiences", c.auth.Audiences, "tls", c.certFile != "",
		"apiservice", c.apiService.String(), "frontProxy", c.auth.FrontProxy != nil)
	return serveAll(ctx, log, srv, c.certFile != "", ops, c.shutdownGrace)
}

// serveAll runs srv (over TLS when tls) and ops (when not nil) until ctx
// ends or one of them fails; then both stop: srv's requests under way
// have grace to finish, ops's none. The error is the first failure, if
// any; serveAll returns once both servers have.
func serveAll(ctx context.Context, log logr.Logger, srv *http.Server, tls bool, ops *http.Server, grace time.Duration) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serve(srv, tls) })
	if ops != nil {
		g.Go(func() error { return serve(ops, false) })
	}
	// Ends the others: a signal, or a server's failure, cancels ctx.
	g.Go(func() error {
		<-ctx.Done()
		log.Info("shutting down")
		return shutdown(log, srv, ops, grace)
	})
	return g.Wait()
}

// shutdown stops srv, giving its requests under way grace to finish, and
// ops at once.
func shutdown(log logr.Logger, srv, ops *http.Server, grace time.Duration) error {
	if ops != nil {
		defer ops.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Streams (watches, WebSockets) outlast any grace: close what is
		// left. Ending them is what a shutdown is for, not a failure.
		log.Info("grace over: closing the connections left", "grace", grace)
		_ = srv.Close()
		return nil
	}
	return err
}

// upstreamHandler forwards to the upstream: under the APIService's
// prefix with --apiservice.
func upstreamHandler(c config, transport http.RoundTripper, log logr.Logger) http.Handler {
	if c.apiService.Empty() {
		return newProxy(c.upstream, "", transport, log)
	}
	prefix := apiServicePrefix(c.apiService)
	return apiService(c.apiService, newProxy(c.upstream, prefix, transport, log), log)
}

// newServer is the server of the callers. No read or write timeout:
// streams last; MaxRequestDuration and the token bound them instead.
func newServer(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
}

// serve runs srv until Shutdown, which is not an error.
func serve(srv *http.Server, tls bool) error {
	var err error
	if tls {
		err = srv.ListenAndServeTLS("", "")
	} else {
		err = srv.ListenAndServe()
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func opsHandler(v *vault.Vault, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := v.Ready(r); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}
