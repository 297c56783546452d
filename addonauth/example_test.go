package addonauth_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/vault"
)

// A service that learns who calls it, as docs/addonauth.md shows it: the
// middleware verifies each caller's token for the service's audience and
// hands the service the caller's identity. It is compiled, not run: it
// needs the cluster whose callers it verifies.
func ExampleAuthenticator_Middleware() {
	v := vault.New(vault.Options{}) // the service's own credentials: the in-cluster ServiceAccount
	defer v.Close()
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	greeter := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _ := addonauth.UserFrom(r.Context())
		fmt.Fprintf(w, "hello, %s\n", user.Name)
	})
	if err := serveGreeter(cfg, greeter); err != nil {
		log.Fatal(err)
	}
}

// serveGreeter serves greeter to the callers that addonauth lets in.
func serveGreeter(cfg *rest.Config, greeter http.Handler) error {
	a, err := addonauth.New(addonauth.Options{Audience: "greeter.addons.svc", Config: cfg}) // cfg from a vault
	if err != nil {
		return err
	}
	http.Handle("/", a.Middleware(greeter)) // 401/403/404/429/503 answered here; UserFrom(r.Context()) in greeter
	return http.ListenAndServeTLS(":8443", "/tls/tls.crt", "/tls/tls.key", nil)
}

// A service behind the API server's aggregation layer, as
// docs/addonauth.md's browser section shows it: a person behind kubectl
// proxy reaches it through its APIService, and it learns who they are
// from the API server's front proxy; callers with a token are served on
// the same listener. Compiled, not run: it needs the cluster.
func ExampleFrontProxy() {
	v := vault.New(vault.Options{})
	defer v.Close()
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	dashboard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _ := addonauth.UserFrom(r.Context())
		fmt.Fprintf(w, "signed in as %s (groups %v)\n", user.Name, user.Groups)
	})
	if err := serveDashboard(context.Background(), cfg, dashboard); err != nil {
		log.Fatal(err)
	}
}

// serveDashboard serves dashboard to people behind kubectl proxy and to
// callers with a token.
func serveDashboard(ctx context.Context, cfg *rest.Config, dashboard http.Handler) error {
	a, err := addonauth.New(addonauth.Options{
		Audience:   "dashboard.kube-system.svc",
		Config:     cfg,                     // reads kube-system/extension-apiserver-authentication too
		FrontProxy: &addonauth.FrontProxy{}, // the ConfigMap's CA and names, followed while Start runs
	})
	if err != nil {
		return err
	}
	go func() { _ = a.Start(ctx) }() // or mgr.Add(a)
	srv := &http.Server{
		Addr:      ":8443",
		Handler:   a.Middleware(dashboard),
		TLSConfig: &tls.Config{ClientAuth: tls.RequestClientCert}, // the middleware verifies the front proxy's
	}
	return srv.ListenAndServeTLS("/tls/tls.crt", "/tls/tls.key")
}

// A service that lists ConfigMaps as each caller, as docs/addonauth.md
// shows it: one client, made from the service's own config, whose every
// request acts as the caller of the request being served. It is compiled,
// not run: it needs the cluster whose callers it verifies.
func ExampleActAsCaller() {
	v := vault.New(vault.Options{})
	defer v.Close()
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	a, err := addonauth.New(addonauth.Options{Audience: "dashboard.kube-system.svc", Config: cfg, FrontProxy: &addonauth.FrontProxy{}})
	if err != nil {
		log.Fatal(err)
	}
	// The front proxy's configuration, followed; and TLS that asks for
	// its client certificate.
	go func() { _ = a.Start(context.Background()) }()
	if err := serveConfigMaps(context.Background(), v, a); err != nil {
		log.Fatal(err)
	}
}

// serveConfigMaps serves each caller the ConfigMaps of team-a the cluster
// lets them list.
func serveConfigMaps(ctx context.Context, v *vault.Vault, a *addonauth.Authenticator) error {
	cfg, err := v.RESTConfig(ctx) // the service's own login
	if err != nil {
		return err
	}
	acting, err := addonauth.ActAsCaller(cfg)
	if err != nil {
		return err
	}
	asCaller, err := kubernetes.NewForConfig(acting) // one client for every caller
	if err != nil {
		return err
	}
	http.Handle("/configmaps", a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// r.Context() holds the caller: the list is made as them.
		list, err := asCaller.CoreV1().ConfigMaps("team-a").List(r.Context(), metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			// The caller's RBAC, or the service's own for impersonation:
			// the message names whom the API server refused.
			log.Printf("listing ConfigMaps as the caller: %v", err)
			http.Error(w, "the cluster refused: "+err.Error(), http.StatusForbidden)
			return
		}
		if err != nil {
			http.Error(w, "the cluster did not answer", http.StatusBadGateway)
			return
		}
		for _, cm := range list.Items {
			fmt.Fprintln(w, cm.Name)
		}
	})))
	srv := &http.Server{Addr: ":8443", TLSConfig: &tls.Config{ClientAuth: tls.RequestClientCert}}
	return srv.ListenAndServeTLS("/tls/tls.crt", "/tls/tls.key")
}

// A request made through ActAsCaller's config outside a request the
// middleware verified has no one to act as: it is never sent, not even as
// the service.
func ExampleActAsCaller_noCaller() {
	acting, err := addonauth.ActAsCaller(&rest.Config{Host: "https://kubernetes.default.svc"})
	if err != nil {
		log.Fatal(err)
	}
	clients, err := kubernetes.NewForConfig(acting)
	if err != nil {
		log.Fatal(err)
	}
	_, err = clients.CoreV1().ConfigMaps("team-a").List(context.Background(), metav1.ListOptions{})
	fmt.Println(errors.Is(err, addonauth.ErrNoCaller))
	// Output: true
}
