package addonauth_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

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
