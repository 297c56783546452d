package fleet

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/federation"
)

func fluxCM(ns string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "member"}, Data: data}
}

// What a Flux ConfigMap may say, and what it may not: each refusal names
// what was wrong, and none serves.
func TestReadFluxConfigMap(t *testing.T) {
	aws := FluxProvider{Audiences: func(*corev1.ServiceAccount) ([]string, error) { return []string{"sts.amazonaws.com"}, nil }, New: func(context.Context, FluxCluster) (federation.Provider, error) { return nil, nil }}
	opts := FluxOptions{Config: reviewHub, Operator: "flux-system/operator", Providers: map[string]FluxProvider{"aws": aws}}
	const server = "https://member.example:6443"
	for _, c := range []struct {
		name    string
		ns      string
		data    map[string]string
		opts    *FluxOptions
		want    string // an error that says this; "" for none
		sa      string
		audList []string
	}{
		{name: "generic, its own ServiceAccount", ns: "team-a", data: map[string]string{"provider": "generic", "address": server, "serviceAccountName": "deployer"}, sa: "deployer", audList: []string{server}},
		{name: "audiences one per line", ns: "team-a", data: map[string]string{"provider": "generic", "address": server, "serviceAccountName": "deployer", "audiences": " member-1 \n\nmember-2\n"}, sa: "deployer", audList: []string{"member-1", "member-2"}},
		// A cloud's audiences come of its ServiceAccount, at the login.
		{name: "a cloud's default audiences", ns: "team-a", data: map[string]string{"provider": "aws", "address": server, "serviceAccountName": "deployer", "cluster": "arn:aws:eks:eu-west-1:111122223333:cluster/prod"}, sa: "deployer", audList: nil},
		{name: "a cloud's audiences key", ns: "team-a", data: map[string]string{"provider": "aws", "address": server, "serviceAccountName": "deployer", "audiences": "custom"}, sa: "deployer", audList: []string{"custom"}},
		{name: "the operator's own, in its namespace", ns: "flux-system", data: map[string]string{"provider": "generic", "address": server}, sa: "operator", audList: []string{server}},
		{name: "the lockdown default", ns: "team-a", data: map[string]string{"provider": "generic", "address": server}, opts: &FluxOptions{Config: reviewHub, Operator: "flux-system/operator", ServiceAccount: "remote"}, sa: "remote", audList: []string{server}},
		{name: "no provider key", ns: "team-a", data: map[string]string{"address": server}, want: "no provider key"},
		{name: "an empty provider", ns: "team-a", data: map[string]string{"provider": "", "address": server}, want: "provider key is empty"},
		{name: "a provider nothing serves", ns: "team-a", data: map[string]string{"provider": "gcp", "address": server, "serviceAccountName": "x"}, want: `provider "gcp" has no FluxOptions.Providers entry`},
		{name: "no address", ns: "team-a", data: map[string]string{"provider": "generic", "serviceAccountName": "x"}, want: "no address key"},
		{name: "plain http", ns: "team-a", data: map[string]string{"provider": "generic", "address": "http://member.example", "serviceAccountName": "x"}, want: "not an https URL"},
		{name: "user info", ns: "team-a", data: map[string]string{"provider": "generic", "address": "https://u:hunter2@member.example", "serviceAccountName": "x"}, want: "not an https URL"},
		{name: "another namespace's ServiceAccount", ns: "team-a", data: map[string]string{"provider": "generic", "address": server, "serviceAccountName": "kube-system/default"}, want: `never another's`},
		{name: "a ServiceAccount's user name", ns: "team-a", data: map[string]string{"provider": "generic", "address": server, "serviceAccountName": "system:serviceaccount:kube-system:default"}, want: `never another's`},
		{name: "none, outside the operator's namespace", ns: "team-a", data: map[string]string{"provider": "generic", "address": server}, want: "serves only the ConfigMaps of its namespace"},
		{name: "none, out of a pod", ns: "team-a", data: map[string]string{"provider": "generic", "address": server}, opts: &FluxOptions{Config: reviewHub}, want: "FluxOptions.Operator is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := opts
			if c.opts != nil {
				o = *c.opts
			}
			m, err := readFluxConfigMap(fluxCM(c.ns, c.data), o)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("got %v, want an error saying %q", err, c.want)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("the error shows the address's password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.serviceAccount != c.sa || m.namespace != c.ns || !slices.Equal(m.audiences, c.audList) {
				t.Errorf("got ServiceAccount %s/%s for %q, want %s/%s for %q", m.namespace, m.serviceAccount, m.audiences, c.ns, c.sa, c.audList)
			}
		})
	}
}

// The informer's cache keeps the Flux keys of a Flux ConfigMap, and
// nothing of another.
func TestSlimFluxConfigMap(t *testing.T) {
	in := fluxCM("ns", map[string]string{"provider": "generic", "address": "https://m", "ca.crt": "PEM", "other": strings.Repeat("x", 1<<20)})
	out, _ := slimFluxConfigMap(in)
	got := out.(*corev1.ConfigMap).Data
	if len(got) != 3 || got["other"] != "" || got["ca.crt"] != "PEM" {
		t.Errorf("kept %d keys (%v), want provider, address and ca.crt", len(got), slices.Sorted(func(yield func(string) bool) {
			for k := range got {
				if !yield(k) {
					return
				}
			}
		}))
	}
	out, _ = slimFluxConfigMap(fluxCM("ns", map[string]string{"ca.crt": "PEM"})) // kube-root-ca.crt
	if out.(*corev1.ConfigMap).Data != nil {
		t.Errorf("kept the data of a ConfigMap with no provider key")
	}
}

// The operator's own ServiceAccount is the sub of the pod's token; a file
// that is no ServiceAccount token names none.
func TestOwnServiceAccount(t *testing.T) {
	dir := t.TempDir()
	old := podTokenFile
	t.Cleanup(func() { podTokenFile = old })
	enc := base64.RawURLEncoding.EncodeToString
	jwt := func(sub string) string {
		return enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc([]byte(`{"sub":"`+sub+`"}`)) + "." + enc([]byte("signature"))
	}
	for _, c := range []struct{ content, want string }{
		{jwt("system:serviceaccount:flux-system:kustomize-controller") + "\n", "flux-system/kustomize-controller"},
		{jwt("alice"), ""},
		{"not a token", ""},
	} {
		podTokenFile = filepath.Join(dir, "token")
		if err := os.WriteFile(podTokenFile, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := ownServiceAccount(); got != c.want {
			t.Errorf("token %.30q: got %q, want %q", c.content, got, c.want)
		}
	}
	podTokenFile = dir // a directory
	if got := ownServiceAccount(); got != "" {
		t.Errorf("a directory: got %q, want none", got)
	}
}

// An access provider served in process is checked as the file's are: one
// way to reach its clusters, a hub to mint on, a ServiceAccount's name.
func TestCheckFederatedProviders(t *testing.T) {
	hub := &rest.Config{Host: "https://hub.example"}
	exec := &clientcmdapi.ExecConfig{Command: "plugin", APIVersion: execAPIVersionV1}
	for _, c := range []struct {
		name string
		p    AccessProvider
		want string
	}{
		{"served in process", AccessProvider{Name: "hub", Federated: &FederatedAccess{Config: hub, ServiceAccount: "fleet"}}, ""},
		{"both", AccessProvider{Name: "hub", ExecConfig: exec, Federated: &FederatedAccess{Config: hub, ServiceAccount: "fleet"}}, "both an execConfig and Federated"},
		{"no hub", AccessProvider{Name: "hub", Federated: &FederatedAccess{ServiceAccount: "fleet"}}, "Federated.Config is required"},
		{"another namespace's", AccessProvider{Name: "hub", Federated: &FederatedAccess{Config: hub, ServiceAccount: "kube-system/default"}}, "not the name of a ServiceAccount"},
		{"an empty audience", AccessProvider{Name: "hub", Federated: &FederatedAccess{Config: hub, ServiceAccount: "fleet", Audiences: []string{""}}}, "empty audience"},
	} {
		err := checkProviders([]AccessProvider{c.p})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	if policy := providersPolicy([]AccessProvider{{Name: "hub", Federated: &FederatedAccess{Config: hub, ServiceAccount: "fleet"}}, {Name: "x", ExecConfig: exec}}); policy.PolicyType == "" {
		t.Errorf("no policy for a file with a provider served in process")
	}
}
