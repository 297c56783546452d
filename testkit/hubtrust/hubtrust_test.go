package hubtrust_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/testkit/hubtrust"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The checks a cloud makes, each on a real hub's token: one that passes
// them all, and one that fails each.
func TestTrustChecksWhatACloudChecks(t *testing.T) {
	hub := hubtrust.StartHub(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(hub.Cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	life := int64(600)
	req, err := cs.CoreV1().ServiceAccounts(hub.Namespace).CreateToken(ctx, hub.ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"sts.amazonaws.com"}, ExpirationSeconds: &life},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := req.Status.Token

	claims, err := hub.Trust("sts.amazonaws.com").Check(ctx, token)
	if err != nil {
		t.Fatalf("a token the hub minted for the audience: %v", err)
	}
	if claims.Subject != hub.Subject() || claims.Issuer != hub.Issuer || claims.KeyID == "" {
		t.Errorf("claims %+v, want the ServiceAccount's subject %q, the hub's issuer %q and a key", claims, hub.Subject(), hub.Issuer)
	}

	other := hub.Trust("sts.amazonaws.com")
	other.Subject = "system:serviceaccount:fleet-system:someone-else"
	later := hub.Trust("sts.amazonaws.com")
	later.Now = func() time.Time { return time.Now().Add(time.Hour) }
	elsewhere := hub.Trust("sts.amazonaws.com")
	elsewhere.Issuer = "https://issuer.example"
	forged := forge(t, claims)
	for _, c := range []struct {
		name  string
		trust hubtrust.Trust
		token string
		want  string
	}{
		{"another audience", hub.Trust("api://AzureADTokenExchange"), token, "audience"},
		{"another subject", other, token, "subject"},
		{"past its expiry", later, token, "expired"},
		{"another issuer", elsewhere, token, "fetching"},
		{"signed by a key of its own", hub.Trust("sts.amazonaws.com"), forged, "does not verify"},
		{"no JWT", hub.Trust("sts.amazonaws.com"), "not-a-jwt", "not a signed JWT"},
	} {
		_, err := c.trust.Check(ctx, c.token)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("%s: the error quotes the token", c.name)
		}
	}
}

// forge signs claims like the hub's with a key of its own, under the
// hub's key ID.
func forge(t *testing.T, c hubtrust.Claims) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", c.KeyID))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: c.Issuer, Subject: c.Subject, Audience: c.Audience, Expiry: jwt.NewNumericDate(c.Expiry)}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
