// Command caller is the client of the addon example: it calls the greeter
// through its addon-proxy with a ServiceAccount token meant for the
// greeter's audience, minted by the API server (TokenRequest) and kept
// fresh by its own vault.
//
// Its API access (to mint the tokens) comes from the vault's fallback:
// in-cluster ServiceAccount or --kubeconfig.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

func main() {
	if flag.Lookup("kubeconfig") == nil {
		flag.String("kubeconfig", "", "a kubeconfig for the API server (default: in-cluster)")
	}
	url := flag.String("url", "", "the greeter's URL, through its addon-proxy (required)")
	audience := flag.String("audience", "greeter.addons.svc", "the greeter's audience")
	namespace := flag.String("namespace", "default", "the namespace of the ServiceAccount to call as")
	name := flag.String("serviceaccount", "caller", "the ServiceAccount to call as")
	flag.Parse()
	if err := run(*url, *audience, *namespace, *name); err != nil {
		fmt.Fprintln(os.Stderr, "caller:", err)
		os.Exit(1)
	}
}

func run(url, audience, namespace, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The vault that reaches the API server, to mint tokens.
	api := vault.New(vault.Options{})
	defer api.Close()
	cfg, err := api.RESTConfig(ctx)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The vault of the greeter's tokens: audience-bound, refreshed before
	// they expire. Its Server is the greeter's address: the token goes
	// there and nowhere else.
	greeter := vault.New(vault.Options{NoFallback: true})
	defer greeter.Close()
	greeter.OnLogin(handlers.TokenRequest(handlers.TokenRequestConfig{
		Client: cs.CoreV1(), Namespace: namespace, Name: name,
		Audiences: []string{audience}, ExpirationSeconds: 600,
		Cluster: login.ConnectionInfo{Server: url},
	}), login.ID("greeter token"))

	client := &http.Client{Transport: greeter.Transport(), Timeout: 30 * time.Second}
	resp, err := client.Get(url + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the greeter answered %s: %s", resp.Status, body)
	}
	fmt.Print(string(body))
	return nil
}
