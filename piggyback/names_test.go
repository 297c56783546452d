package piggyback

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// namesCases are the handlers this package makes, with the names they give
// themselves; the fallback's are its IDs.
func namesCases() []struct {
	h         login.Handler
	id, label string
} {
	cases := []struct {
		h         login.Handler
		id, label string
	}{
		{ServiceAccount, "service account", "service account"},
		{ServiceAccountIn("/mnt/sa"), "service account /mnt/sa", "service account"},
		{Kubeconfig, "kubeconfig $KUBECONFIG or ~/.kube/config", "kubeconfig"},
		{KubeconfigFrom(KubeconfigOptions{Path: "/home/u/.kube/config"}), "kubeconfig /home/u/.kube/config", "kubeconfig"},
		{KubeconfigFrom(KubeconfigOptions{Path: "/etc/kc", Context: "admin@prod"}), `kubeconfig /etc/kc context "admin@prod"`, "kubeconfig"},
		{KubeconfigFrom(KubeconfigOptions{}), "kubeconfig $KUBECONFIG or ~/.kube/config", "kubeconfig"},
		{ClientGo, "client-go config", "client-go"},
		{handlers.RESTConfig(&rest.Config{Host: "https://robot:s3cret-0123456789@api.example:6443", BearerToken: "s3cret-0123456789"}),
			"rest.Config https://[redacted]@api.example:6443", "rest.Config"},
	}
	labels := []string{"kubeconfig", "service account", "home kubeconfig"}
	for i, r := range Defaults() {
		cases = append(cases, struct {
			h         login.Handler
			id, label string
		}{r.Handler, sources()[i].id, labels[i]})
	}
	return cases
}

// Every handler of the package names itself after what it reads, never with
// a secret it was given; login.ID still overrides the name.
func TestHandlersNameThemselves(t *testing.T) {
	for _, tc := range namesCases() {
		s := handlerconf.Configure[login.Option](tc.h)
		if s.ID != tc.id {
			t.Errorf("ID = %q, want %q", s.ID, tc.id)
		}
		if strings.Contains(s.ID, "s3cret") {
			t.Errorf("ID %q holds a secret", s.ID)
		}
		if s := handlerconf.Configure(tc.h, login.ID("mine")); s.ID != "mine" {
			t.Errorf("with login.ID, ID = %q, want mine", s.ID)
		}
	}
}

// A handler's metric label is the kind of what it reads: short, and the
// same whatever file or object it reads, so that no path or name becomes a
// label value.
func TestHandlerLabelsAreShort(t *testing.T) {
	for _, tc := range namesCases() {
		s := handlerconf.Configure[login.Option](tc.h)
		if s.Label != tc.label {
			t.Errorf("%s: label = %q, want %q", s.ID, s.Label, tc.label)
		}
		if len(s.Label) > 20 || strings.ContainsAny(s.Label, "/:\"") {
			t.Errorf("%s: label %q is not short and stable", s.ID, s.Label)
		}
		if s := handlerconf.Configure(tc.h, login.ID("mine")); s.Label != "mine" {
			t.Errorf("with login.ID, label = %q, want mine", s.Label)
		}
	}
}
