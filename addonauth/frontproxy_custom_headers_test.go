package addonauth

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/authvault/authvault/testkit/testpki"
)

// The ConfigMap may name other headers than X-Remote-*: a bearer caller's
// copies of those, in any spelling, never reach the upstream, whatever
// state the configuration is in now. Once the middleware has learnt the
// cluster's identity headers, it must not forget to strip them because
// the ConfigMap went away (or before it is read: the names are only
// known from it).
func TestFrontProxyCustomHeadersFromTheConfigMapAreStripped(t *testing.T) {
	ca := testpki.NewCA(t)
	cm := authConfigMap(ca.PEM, `["front-proxy-client"]`)
	cm.Data["requestheader-username-headers"] = `["X-Custom-User"]`
	cm.Data["requestheader-group-headers"] = `["X-Custom-Group"]`
	cm.Data["requestheader-uid-headers"] = `["X-Custom-Uid"]`
	cm.Data["requestheader-extra-headers-prefix"] = `["X-Custom-Extra-"]`
	client := fake.NewClientset(cm)
	s := newFrontSetup(t, FrontProxy{}, Options{frontProxyClient: client})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	forged := http.Header{
		"Authorization":         {"Bearer " + tok},
		"X-Custom-User":         {"system:admin"},
		"X_custom_user":         {"system:admin"},
		"X-Custom-Group":        {"system:masters"},
		"X-Custom-Uid":          {"0"},
		"X-Custom-Extra-Scopes": {"*"},
	}
	check := func(state string) {
		t.Helper()
		before := s.up.count()
		resp, body := s.get(t, s.client(t, nil, ""), forged)
		if resp.StatusCode != 200 || s.up.count() != before+1 {
			t.Fatalf("%s: GET = %d %q", state, resp.StatusCode, body)
		}
		for name, v := range s.up.seen[before] {
			if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(name, "_", "-")), "x-custom-") {
				t.Errorf("%s: %s: %q reached the upstream from a bearer caller", state, name, v)
			}
		}
	}
	waitFor(t, "the ConfigMap to be read", func() bool {
		resp, _ := s.get(t, s.client(t, ca, "front-proxy-client"), http.Header{"X-Custom-User": {"alice"}})
		return resp.StatusCode == 200
	})
	check("loaded")
	if err := client.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deletion to be seen", func() bool { return strings.Contains(s.log(), "was deleted") })
	check("deleted")
}
