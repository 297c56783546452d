package gke_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// A vault logged in to a GKE cluster with a service-account key. Here the
// key's token_uri is a loopback stand-in for oauth2.googleapis.com; in a
// cluster, leave the credentials out: Application Default Credentials find
// GKE's workload identity.
func ExampleLogin() {
	google := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"ya29.example","token_type":"Bearer","expires_in":3600}`)
	}))
	defer google.Close()

	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(gke.Login(gke.Options{
		Server:          "https://34.118.0.10",
		CAData:          testCA(), // the cluster's masterAuth.clusterCaCertificate
		CredentialsJSON: exampleKey(google.URL),
	}), login.ID("gke"))

	cred, err := v.Select(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cred.Handler, cred.Info.Server, time.Until(cred.Info.Expiration).Round(time.Hour))
	// Output: gke https://34.118.0.10 1h0m0s
}

// exampleKey is a service-account key file whose token_uri is tokenURI.
func exampleKey(tokenURI string) []byte {
	k, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	b, _ := json.Marshal(map[string]string{
		"type":         "service_account",
		"client_email": "operator@example-project.iam.gserviceaccount.com",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"token_uri":    tokenURI,
	})
	return b
}
