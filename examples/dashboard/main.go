// Command dashboard is the web service of the browser walk-through: a page
// that shows who is signed in, keeps notes, each with the name of who added
// it, and lists the ConfigMaps of a namespace as the person sees them: it
// asks the API server as them, so the cluster's RBAC decides what each
// person sees. A person reaches it from a browser through kubectl proxy and
// the API server's aggregation layer, with addon-proxy in front of it; it
// handles no credential of theirs.
//
//	go run ./examples/dashboard --listen 127.0.0.1:8443 \
//	    --tls-cert-file tls.crt --tls-key-file tls.key \
//	    --proxy-client-ca-file addon-proxy-ca.crt --kubeconfig dashboard.kubeconfig
//
// # What runs in front of it
//
// From the browser to the dashboard, a request passes:
//
//  1. kubectl proxy on 127.0.0.1:8001, which adds the person's kubeconfig
//     credential: the browser opens
//     http://127.0.0.1:8001/apis/GROUP/VERSION/ (the trailing slash
//     matters: the page's links are relative to it).
//  2. The kube-apiserver, which authenticates the person and, for the path
//     of an APIService (GROUP/VERSION, backed by a Service), forwards the
//     request through its aggregation layer with the person's identity in
//     X-Remote-User, X-Remote-Uid, X-Remote-Group and X-Remote-Extra-*,
//     over TLS with its front-proxy client certificate.
//  3. addon-proxy --apiservice GROUP/VERSION --upstream
//     https://127.0.0.1:8443, which trusts those headers only from that
//     certificate, refuses cross-site requests that could act as the
//     person, strips the prefix /apis/GROUP/VERSION and forwards to the
//     dashboard with the identity in X-Authenticated-User, -UID, -Groups
//     (one value per group) and -Extra-*, over TLS with a client
//     certificate of its own (--upstream-client-cert-file).
//  4. The dashboard, which takes those headers as addon-proxy's word only
//     over addon-proxy's client certificate (--proxy-client-ca-file, and a
//     common name among --proxy-names): package addonauth's middleware
//     verifies it, as addon-proxy verifies the API server's, and puts the
//     caller in the request's context. Any other connection's copies are
//     removed: a program on the same machine cannot name someone to act as.
//
// On the way back addon-proxy puts a redirect under the prefix again: the
// dashboard's answer to a posted note, 303 to /notes, reaches the browser
// as a page that sends it on to notes, relative to the page it posted
// from (the aggregation layer answers a redirect itself with 502).
//
// # Acting as the person
//
// The dashboard logs in as itself through a vault (--kubeconfig, or the
// pod's ServiceAccount) and lists ConfigMaps through
// addonauth.ActAsCaller's copy of that config: each request carries the
// verified caller in Impersonate-User, -Uid, -Group and -Extra-*, so the
// API server authorizes the person, and its audit log names both. Its
// RBAC needs to impersonate, nothing more: deploy/dashboard has both ways
// (constrained impersonation, which lets it act as people only to list
// ConfigMaps, and the classic verb, which lets it act as them for
// anything); docs/addonauth.md says what each grants.
//
// # Pages
//
// GET / is a landing page with links and nothing else: through the API
// server it is the group-version's root, which every authenticated user may
// GET. GET /notes is the page, which RBAC grants as list on the resource
// notes: "signed in as USER (groups G1, G2)", the notes kept so far as
// "AUTHOR: TEXT", oldest first ("No notes yet" when there are none), and a
// form that posts a note to the relative URL notes. POST /notes (create)
// keeps the field text (at most 1 KiB, not blank) under the caller's name
// and answers 303 to /notes. A WebSocket's handshake at GET
// /notes?watch=1 (watch on notes; without ?watch=1, which RBAC authorized
// as list, it gets 400) gets every note, then each one as it is added, as
// JSON {"author", "text"}, a message each; a person may hold five at once.
// The last 100 notes are kept, in memory. GET /configmaps?namespace=NS
// (list on the resource configmaps of the dashboard's group; NS defaults
// to --namespace) lists the names of NS's ConfigMaps as the person, or,
// when the cluster refuses, answers 403 with a page that says what they
// may not do, in the API server's words; nothing is cached, so access
// revoked shows at the next click. A request that no one vouched for gets
// 401; GET /healthz needs no identity.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"log"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/vault"
)

func main() {
	if err := run(); err != nil {
		log.Fatalf("dashboard: %v", err)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8443", "address to listen on (TLS): localhost, so that only addon-proxy beside it reaches it")
	certFile := flag.String("tls-cert-file", "", "serving certificate (PEM) that addon-proxy's --upstream-ca-file verifies (required)")
	keyFile := flag.String("tls-key-file", "", "key (PEM) of --tls-cert-file (required)")
	proxyCA := flag.String("proxy-client-ca-file", "", "CA (PEM) of addon-proxy's client certificate, its --upstream-client-cert-file (required): the identity headers are trusted only over it")
	proxyNames := flag.String("proxy-names", "addon-proxy", "common names addon-proxy's client certificate may have, comma-separated")
	namespace := flag.String("namespace", "default", "the namespace whose ConfigMaps the page lists when the request names none")
	origins := flag.String("trusted-origins", "", "origins of pages that may post to it, comma-separated, as addon-proxy's --trusted-origins")
	if flag.Lookup("kubeconfig") == nil {
		flag.String("kubeconfig", "", "a kubeconfig to log in with (default: the pod's ServiceAccount, $KUBECONFIG, ~/.kube/config)")
	}
	flag.Parse()
	if *certFile == "" || *keyFile == "" || *proxyCA == "" {
		return errors.New("--tls-cert-file, --tls-key-file and --proxy-client-ca-file are required: the dashboard serves addon-proxy over TLS and trusts its client certificate alone")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := funcr.New(func(prefix, args string) { log.Println(prefix, args) }, funcr.Options{})

	// The dashboard's own login, rotating under every request.
	v := vault.New(vault.Options{Logger: logger.WithName("authvault")})
	defer v.Close()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		return err
	}
	auth, err := addonauth.New(addonauth.Options{
		Config: cfg, Logger: logger, Audience: "dashboard",
		FrontProxy: &addonauth.FrontProxy{
			ClientCAFile: *proxyCA, AllowedNames: split(*proxyNames),
			UsernameHeaders: []string{headerUser}, UIDHeaders: []string{headerUID},
			GroupHeaders: []string{headerGroups}, ExtraHeaderPrefixes: []string{headerExtra},
		},
		TrustedOrigins: split(*origins), TrustedOriginsSetting: "dashboard --trusted-origins",
		IgnorePaths: []string{"/healthz"},
	})
	if err != nil {
		return err
	}
	acting, err := addonauth.ActAsCaller(cfg)
	if err != nil {
		return err
	}
	d := newDashboard()
	if d.cluster, err = kubernetes.NewForConfig(acting); err != nil {
		return err
	}
	d.namespace = *namespace

	follow, stopFollowing := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() { followed <- auth.Start(follow) }()
	defer func() { stopFollowing(); <-followed }()

	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: *listen, Handler: auth.Middleware(d), ReadHeaderTimeout: 10 * time.Second,
		// Asked for, verified by the middleware: a connection without
		// addon-proxy's certificate is a caller like any other.
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}}
	srv.RegisterOnShutdown(d.stop) // the WebSockets, which Shutdown does not close
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServeTLS("", "") }()
	log.Printf("dashboard: listening on %s", *listen)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Ctrl-C or SIGTERM: the requests in flight finish first.
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		log.Printf("dashboard: shutting down: %v", err)
	}
	return nil
}

// split is a comma-separated flag's values.
func split(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
