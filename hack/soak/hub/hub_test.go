package hub

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/authvault/authvault/hack/soak/plugin"
	"github.com/authvault/authvault/hack/soak/wire"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testwait"
)

// One hub for every check, in order: an API server takes seconds to start.
func TestHub(t *testing.T) {
	ctx := context.Background()
	h, err := Start(ctx, Options{Dir: t.TempDir(), Binary: "/bin/false", SecretClusters: 3, ProfileClusters: 1,
		MinTokenLife: 6 * time.Second, MaxTokenLife: 9 * time.Second, PluginLatency: 10 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	cfg := h.Config(wire.RoleAuthvault)

	// asToken is a client with tok, trusting the CA file.
	asToken := func(tok string) kubernetes.Interface {
		return kubernetes.NewForConfigOrDie(&rest.Config{Host: cfg.Server, BearerToken: tok, TLSClientConfig: rest.TLSClientConfig{CAFile: cfg.CAFile}})
	}
	works := func(tok string) error {
		wctx, cancel := context.WithTimeout(ctx, testwait.Hang)
		defer cancel()
		_, err := asToken(tok).CoreV1().Namespaces().Get(wctx, cfg.Namespace, metav1.GetOptions{})
		return err
	}
	fetch := func(side string) (*http.Response, error) {
		return http.Get(h.Config(side).PluginEnv[wire.PluginURLEnv])
	}
	tokenOf := func(resp *http.Response) plugin.Answer {
		t.Helper()
		defer resp.Body.Close()
		var a plugin.Answer
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&a) != nil || a.Token == "" {
			t.Fatalf("token endpoint answered %s, want a token", resp.Status)
		}
		return a
	}
	secretToken := func(cluster string) string {
		s, err := h.client().core.CoreV1().Secrets(secretsNamespace).Get(ctx, secretName(cluster), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.Load(s.Data["value"])
		if err != nil {
			t.Fatalf("Secret %s: %v", s.Name, err)
		}
		return kc.AuthInfos[cluster+"-admin"].Token
	}

	t.Run("files and objects", func(t *testing.T) {
		tok, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := works(string(tok)); err != nil {
			t.Errorf("the token file's token: %v", err)
		}
		if _, err := h.client().core.CoreV1().Pods(cfg.Namespace).Get(ctx, cfg.Pod, metav1.GetOptions{}); err != nil {
			t.Errorf("the side's pod: %v", err)
		}
		if err := works(secretToken("member-00")); err != nil {
			t.Errorf("member-00's kubeconfig token: %v", err)
		}
		if _, err := h.client().dyn.Resource(profilesGVR).Namespace(profilesNamespace).Get(ctx, "profile-00", metav1.GetOptions{}); err != nil {
			t.Errorf("profile-00: %v", err)
		}
	})

	t.Run("a Secret's token is rewritten before it expires", func(t *testing.T) {
		// Its token works until the Secret holds the next one: the first
		// rewrite comes two thirds into the first token's life, not
		// into another's.
		first := secretToken("member-01")
		testwait.For(t, "member-01's Secret rewritten", func() bool {
			if secretToken("member-01") != first {
				return true
			}
			if err := works(first); err != nil {
				t.Fatalf("member-01's first token failed before its Secret was rewritten: %v", err)
			}
			return false
		})
		if err := works(secretToken("member-01")); err != nil {
			t.Errorf("the rewritten token: %v", err)
		}
	})

	t.Run("endpoint modes", func(t *testing.T) {
		resp, err := fetch(wire.RoleClientGo)
		if err != nil {
			t.Fatal(err)
		}
		a := tokenOf(resp)
		if exp, err := time.Parse(time.RFC3339, a.Expires); err != nil || time.Until(exp) > 10*time.Second {
			t.Errorf("expires %q, want within the tokens' 9-s life", a.Expires)
		}
		if err := works(a.Token); err != nil {
			t.Errorf("the endpoint's token: %v", err)
		}

		h.endpoints[wire.RoleClientGo].setMode(Failing)
		resp, err = fetch(wire.RoleClientGo)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("failing: %s, want 503", resp.Status)
		}

		h.endpoints[wire.RoleClientGo].setMode(Partition)
		if resp, err := fetch(wire.RoleClientGo); err == nil {
			resp.Body.Close()
			t.Errorf("partition: answered %s, want the connection dropped", resp.Status)
		}

		h.endpoints[wire.RoleClientGo].setMode(Hanging)
		answered := make(chan *http.Response, 1)
		go func() {
			resp, err := fetch(wire.RoleClientGo)
			if err != nil {
				resp = nil
			}
			answered <- resp
		}()
		select {
		case <-answered:
			t.Fatal("hanging: answered")
		case <-time.After(300 * time.Millisecond): // it hangs at least this long
		}
		h.endpoints[wire.RoleClientGo].setMode(Serving)
		select {
		case resp := <-answered:
			if resp == nil {
				t.Fatal("the run that hung failed once released")
			}
			tokenOf(resp)
		case <-time.After(testwait.Hang):
			t.Fatal("the run that hung was not released")
		}
	})

	t.Run("revoke", func(t *testing.T) {
		resp, err := fetch(wire.RoleAuthvault)
		if err != nil {
			t.Fatal(err)
		}
		a := tokenOf(resp)
		before := map[string]string{}
		for _, m := range h.members.secrets {
			before[m] = secretToken(m)
		}
		faults, err := h.Revoke(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		scopes := map[string]bool{}
		for _, f := range faults {
			scopes[f.Scope] = true
			if f.Kind != "revocation" || f.Grace < testcluster.ReviewCacheTTL {
				t.Errorf("fault %+v: want a revocation whose grace covers the API server's review cache", f)
			}
		}
		if !scopes["hub"] || !scopes[profilesScope] || len(faults) != 4 {
			t.Errorf("scopes %v, want hub, profiles and two clusters", scopes)
		}
		deadline := time.Now().Add(testcluster.ReviewCacheTTL + testwait.Hang)
		for err := works(a.Token); !apierrors.IsUnauthorized(err); err = works(a.Token) {
			if time.Now().After(deadline) {
				t.Fatalf("the revoked plugin token still works (%v)", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		changed := 0
		for _, f := range faults {
			if name, ok := strings.CutPrefix(f.Scope, "cluster:"+secretsNamespace+"/"); ok {
				if secretToken(name) == before[name] {
					t.Errorf("%s's Secret still holds the revoked token", name)
				}
				changed++
			}
		}
		if changed != 2 {
			t.Errorf("%d clusters revoked, want 2", changed)
		}
	})

	t.Run("leaks", func(t *testing.T) {
		resp, err := fetch(wire.RoleAuthvault)
		if err != nil {
			t.Fatal(err)
		}
		tok := tokenOf(resp).Token
		for _, tc := range []struct {
			text string
			want int
		}{
			{"nothing here", 0},
			{"token " + tok + " in a log line", 1},
			{"first part " + tok[:14] + "…", 1},
			{"av-0123456789abcdef0123456789abcdef is no token of ours", 0},
		} {
			if got := h.Leaks("test", []byte(tc.text)); len(got) != tc.want {
				t.Errorf("Leaks(%q) = %q, want %d", tc.text, got, tc.want)
			} else if tc.want > 0 && strings.Contains(got[0], tok[3:]) {
				t.Errorf("Leaks quotes the token: %q", got[0])
			}
		}
	})

	t.Run("CA rotation", func(t *testing.T) {
		// A ServiceAccount token signed before the rotation is still good
		// after it: the signing key does not rotate with the serving CA.
		sa, err := h.client().core.CoreV1().ServiceAccounts(cfg.Namespace).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "caller"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := h.client().core.CoreV1().ServiceAccounts(cfg.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old, _ := os.ReadFile(cfg.CAFile)
		if _, err := h.RotateCA(ctx, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		ca, _ := os.ReadFile(cfg.CAFile)
		if string(ca) == string(old) {
			t.Fatal("the CA file did not change")
		}
		// The token file's token may be the one the revocation above
		// revoked until its next rewrite (two thirds into its life): the
		// file's token of the moment works with the new CA file.
		testwait.For(t, "the token file's token to work with the new CA file", func() bool {
			tok, _ := os.ReadFile(cfg.TokenFile)
			return works(string(tok)) == nil
		})
		review, err := h.client().core.AuthenticationV1().TokenReviews().Create(ctx,
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
		if err != nil || !review.Status.Authenticated {
			t.Errorf("a ServiceAccount token from before the rotation: authenticated %v, err %v (%s), want it still good", review != nil && review.Status.Authenticated, err, review.Status.Error)
		}
		s, err := h.client().core.CoreV1().Secrets(secretsNamespace).Get(ctx, secretName("member-02"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kc, _ := clientcmd.Load(s.Data["value"])
		if got := string(kc.Clusters["member-02"].CertificateAuthorityData); got != string(ca) {
			t.Error("member-02's kubeconfig does not hold the new CA")
		}
		p, err := h.client().dyn.Resource(profilesGVR).Namespace(profilesNamespace).Get(ctx, "profile-00", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		providers, _, _ := unstructured.NestedSlice(p.Object, "status", "accessProviders")
		if len(providers) != 1 {
			t.Fatalf("profile-00 offers %d providers, want 1", len(providers))
		}
		data, _, _ := unstructured.NestedString(providers[0].(map[string]any), "cluster", "certificate-authority-data")
		if raw, _ := base64.StdEncoding.DecodeString(data); string(raw) != string(ca) {
			t.Error("profile-00's status does not hold the new CA")
		}
	})
}
