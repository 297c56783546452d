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
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
	authzv1 "k8s.io/api/authorization/v1"
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

type config struct {
	listen, opsListen, upstream, certFile, keyFile string
	shutdownGrace                                  time.Duration
	auth                                           addonauth.Options
	requestHeaders, authorize                      bool
	authorizeResource                              string
	rate                                           float64
}

func parseFlags() (config, error) {
	var c config
	if flag.Lookup("kubeconfig") == nil { // the vault's fallback reads it
		flag.String("kubeconfig", "", "a kubeconfig to log in with (default: the pod's ServiceAccount, $KUBECONFIG, ~/.kube/config)")
	}
	flag.StringVar(&c.listen, "listen", ":8443", "address to serve the callers on")
	flag.StringVar(&c.opsListen, "ops-listen", ":9090", "address of /healthz, /readyz and /metrics (\"0\": off)")
	flag.StringVar(&c.upstream, "upstream", "", "the service's URL, on localhost (required), e.g. http://127.0.0.1:8080")
	flag.StringVar(&c.auth.Audience, "audience", "", "the audience callers' tokens must name (required)")
	flag.StringVar(&c.certFile, "tls-cert-file", "", "serving certificate (PEM), reread when it changes; with --tls-key-file")
	flag.StringVar(&c.keyFile, "tls-key-file", "", "serving key (PEM), reread when it changes")
	flag.BoolVar(&c.auth.NoReview, "no-review", false, "verify tokens locally only: a revoked token keeps access until it expires")
	flag.BoolVar(&c.auth.ReviewForeign, "review-foreign", false, "send tokens of other issuers to TokenReview instead of refusing them")
	flag.DurationVar(&c.auth.SuccessTTL, "success-ttl", 0, "how long a successful review is trusted (default 10s)")
	flag.DurationVar(&c.auth.FailureTTL, "failure-ttl", 0, "how long a refused token is refused without asking (default 10s)")
	flag.DurationVar(&c.auth.StaleIfError, "stale-if-error", 0, "how old a successful review may be to serve while the API server is unreachable (default 5m; negative: none)")
	flag.Float64Var(&c.rate, "rate-per-user", 0, "requests per second per user (default: no limit)")
	flag.IntVar(&c.auth.BurstPerUser, "burst-per-user", 0, "bucket size per user (default: the rate, at least 1)")
	flag.DurationVar(&c.auth.MaxRequestDuration, "max-request-duration", 0, "end every request after this long (default 1h; negative: none)")
	flag.BoolVar(&c.requestHeaders, "requestheader-names", false, "set X-Remote-User, X-Remote-Group and X-Remote-Uid instead of X-Authenticated-*")
	flag.BoolVar(&c.authorize, "authorize", false, "also require the caller to be allowed the request's path and verb (SubjectAccessReview, non-resource URL)")
	flag.StringVar(&c.authorizeResource, "authorize-resource", "", "also require the caller to be allowed this resource, namespace/resource[/subresource], with the request's verb")
	flag.DurationVar(&c.shutdownGrace, "shutdown-grace", 20*time.Second, "how long requests under way may finish on SIGTERM, then the rest are closed (below the pod's termination grace, 30s by default)")
	flag.Parse()
	switch {
	case c.upstream == "":
		return c, errors.New("--upstream is required")
	case c.auth.Audience == "":
		return c, errors.New("--audience is required")
	case (c.certFile == "") != (c.keyFile == ""):
		return c, errors.New("--tls-cert-file and --tls-key-file go together")
	}
	c.auth.RatePerUser = rate.Limit(c.rate)
	switch {
	case c.authorizeResource != "":
		parts := strings.Split(c.authorizeResource, "/")
		if len(parts) < 2 || len(parts) > 3 || parts[1] == "" {
			return c, fmt.Errorf("--authorize-resource %q is not namespace/resource[/subresource]", c.authorizeResource)
		}
		attrs := &authzv1.ResourceAttributes{Namespace: parts[0], Resource: parts[1]}
		if len(parts) == 3 {
			attrs.Subresource = parts[2]
		}
		c.auth.Authorization = &addonauth.Authorization{Resource: attrs}
	case c.authorize:
		c.auth.Authorization = &addonauth.Authorization{}
	}
	if c.requestHeaders {
		c.auth.Headers = addonauth.RequestHeaders
	}
	return c, nil
}

func run() error {
	c, err := parseFlags()
	if err != nil {
		return err
	}
	log := zap.New(zap.UseDevMode(false)).WithName("addon-proxy")
	upstream, err := url.Parse(c.upstream)
	if err != nil || upstream.Scheme == "" || upstream.Host == "" {
		return fmt.Errorf("--upstream %q is not an absolute URL", c.upstream)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	v := vault.New(vault.Options{Logger: log, Registerer: reg})
	defer v.Close()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		return fmt.Errorf("logging in to the API server: %w", err)
	}
	c.auth.Config, c.auth.Logger, c.auth.Registerer = cfg, log, reg
	auth, err := addonauth.New(c.auth)
	if err != nil {
		return err
	}

	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				log.Error(err, "forwarding", "path", r.URL.Path)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	// No read or write timeout: streams last; MaxRequestDuration and the
	// token bound them instead.
	srv := &http.Server{Addr: c.listen, Handler: auth.Middleware(proxy), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if c.certFile != "" {
		certs := &certReloader{certFile: c.certFile, keyFile: c.keyFile, log: log}
		if _, err := certs.load(); err != nil {
			return err
		}
		srv.TLSConfig = certs.tlsConfig()
	}

	errs := make(chan error, 2)
	go func() { errs <- serve(srv, c.certFile != "") }()
	var ops *http.Server
	if c.opsListen != "0" {
		ops = &http.Server{Addr: c.opsListen, Handler: opsHandler(v, reg), ReadHeaderTimeout: 10 * time.Second}
		go func() { errs <- serve(ops, false) }()
	}
	log.Info("serving", "listen", c.listen, "upstream", upstream.String(), "audience", c.auth.Audience, "tls", c.certFile != "")

	select {
	case err = <-errs:
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownGrace)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	if errors.Is(shutErr, context.DeadlineExceeded) {
		// Streams (watches, WebSockets) outlast any grace: close what is
		// left. Ending them is what a shutdown is for, not a failure.
		log.Info("grace over: closing the connections left", "grace", c.shutdownGrace)
		_ = srv.Close()
		shutErr = nil
	}
	if ops != nil {
		_ = ops.Close()
	}
	return errors.Join(err, shutErr)
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
