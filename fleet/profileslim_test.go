package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

// The watch's cache keeps of a profile what the provider file can use: the
// cluster data of the providers the file names, and only the names of the
// others, so that whoever writes profiles cannot make this process hold
// megabytes per profile of data it never reads (10,000 profiles of a
// megabyte each would be 10 GB). What the watch decides, and what it logs,
// is the same from the slim profile as from the whole one.
func TestProfileTransformKeepsWhatTheFileCanUse(t *testing.T) {
	providers := []AccessProvider{{Name: "test", ExecConfig: &clientcmdapi.ExecConfig{Command: "p", APIVersion: execAPIVersionV1}}}
	transform := profileTransform(providers)
	big := strings.Repeat("A", 1<<20)
	small := map[string]any{"server": "https://test.example", "certificate-authority-data": "Q0E=",
		"extensions": []any{map[string]any{"name": ExecExtension, "extension": map[string]any{"region": "eu"}}}}
	bulky := map[string]any{"server": "https://other.example", "certificate-authority-data": big}

	served := profile("inv", "served", "unused", bulky, "test", bulky, "test", small) // the last of a name wins
	served.Object["status"].(map[string]any)["credentialProviders"] = []any{
		map[string]any{"name": "old-unused", "cluster": bulky},
		map[string]any{"name": "test", "cluster": bulky},
	}
	var others []any
	for i := range 12 {
		others = append(others, fmt.Sprintf("other-%02d-%s", i, strings.Repeat("x", 70)), bulky)
	}
	refused := profile("inv", "refused", others...)

	for _, u := range []*unstructured.Unstructured{served, refused} {
		out, err := transform(u.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		slim := out.(*unstructured.Unstructured)
		b, _ := json.Marshal(slim.Object)
		if len(b) > 4<<10 {
			t.Errorf("%s: the cache keeps %d bytes of it, want under 4 KiB", u.GetName(), len(b))
		}
		again, _ := transform(slim.DeepCopy())
		if b2, _ := json.Marshal(again.(*unstructured.Unstructured).Object); string(b2) != string(b) {
			t.Errorf("%s: the transform is not idempotent", u.GetName())
		}
		want, wantErr := accessFor(u, providers)
		got, gotErr := accessFor(slim, providers)
		switch {
		case fmt.Sprint(gotErr) != fmt.Sprint(wantErr):
			t.Errorf("%s: from the slim profile %v, from the whole one %v", u.GetName(), gotErr, wantErr)
		case want != nil && (got.digest != want.digest || got.cluster.Server != want.cluster.Server):
			t.Errorf("%s: from the slim profile %s (digest %x), from the whole one %s (digest %x)",
				u.GetName(), got.cluster.Server, got.digest[:4], want.cluster.Server, want.digest[:4])
		}
	}
}

// Under the watch's default plugin policy, a variable that steers a plugin
// is refused when a profile sets it, whatever the provider's env policy
// (Replace lets a profile override the provider's own variables): the
// plugin never runs, and the error names the variable, not its value.
func TestProfileEnvThatSteersIsRefused(t *testing.T) {
	s := newSpoke(t)
	p := newTestProvider(t, "test")
	p.ProfileSourcedEnvVarsPolicy = EnvReplace
	h := newProfileHub(t, ProfilesOptions{Providers: []AccessProvider{p.AccessProvider}})
	for _, name := range []string{"LD_PRELOAD", "PATH", "BASH_ENV", "AWS_ENDPOINT_URL_STS", "KUBECONFIG",
		"ARM_CLIENT_CERTIFICATE_PATH", "ACTIONS_ID_TOKEN_REQUEST_URL", "SYSTEM_OIDCREQUESTURI"} {
		profileName := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
		h.put(t, profile("inv", profileName, "test", s.cluster(ExtraEnvExtension, map[string]any{name: "/tmp/evil-value"})))
		eventually(t, "the cluster is added", func() bool { return h.fleet.Vault("inv/"+profileName) != nil })
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang) // refused at once
		_, err := h.fleet.RESTConfig(ctx, "inv/"+profileName)
		cancel()
		if err == nil || !strings.Contains(err.Error(), `env "`+name+`" is not allowed`) || strings.Contains(err.Error(), "evil-value") {
			t.Errorf("%s from a profile: %v, want it refused by name", name, err)
		}
	}
	if n := p.runs(); n != 0 {
		t.Errorf("the plugin ran %d times", n)
	}
	if strings.Contains(h.logs.String(), "evil-value") {
		t.Error("the log shows a value of the profile's env")
	}
}

// A native login (handlers.UseNative) that serves a provider's plugin
// takes a profile for someone else's kubeconfig: NativeRequest.Untrusted,
// with the profile's server and the arguments it appends. A native login
// registered after the watch started is not in its default policy, which
// is made when it starts: its profiles are refused, saying so.
func TestProfileNativeLogin(t *testing.T) {
	var mu sync.Mutex
	var got []handlers.NativeRequest
	native := func(name string) handlers.Native {
		return handlers.Native{
			Name:   name,
			Serves: func(exec clientcmdapi.ExecConfig) bool { return exec.Command == name+"-plugin" },
			Handler: func(req handlers.NativeRequest) (login.Handler, error) {
				mu.Lock()
				got = append(got, req)
				mu.Unlock()
				return func(context.Context) (*login.ConnectionInfo, error) {
					return &login.ConnectionInfo{Token: "native-token"}, nil
				}, nil
			},
		}
	}
	handlers.UseNative(native("fleet-test-early"))
	t.Cleanup(func() { // serve nothing, so that a run again (-count) starts as this one did
		handlers.UseNative(handlers.Native{Name: "fleet-test-early"}, handlers.Native{Name: "fleet-test-late"})
	})
	provider := func(name string) AccessProvider {
		return AccessProvider{Name: name, ProfileSourcedCLIArgsPolicy: ArgsAppend,
			ExecConfig: &clientcmdapi.ExecConfig{Command: name + "-plugin", Args: []string{"get-token"}, APIVersion: execAPIVersionV1}}
	}
	s := newSpoke(t)
	h := newProfileHub(t, ProfilesOptions{Providers: []AccessProvider{provider("fleet-test-early"), provider("fleet-test-late")}})
	h.put(t, profile("inv", "early", "fleet-test-early", s.cluster(ExtraArgsExtension, []any{"--from-profile"})))
	eventually(t, "the watch runs", func() bool { return h.fleet.Vault("inv/early") != nil })
	handlers.UseNative(native("fleet-test-late"))
	h.put(t, profile("inv", "late", "fleet-test-late", s.cluster()))
	eventually(t, "the second is added", func() bool { return h.fleet.Vault("inv/late") != nil })
	ctx := ctxFor(t)
	cfg, err := h.fleet.RESTConfig(ctx, "inv/early")
	if err != nil {
		t.Fatal(err)
	}
	get(t, cfg)
	if s.lastAuth() != "Bearer native-token" {
		t.Errorf("the cluster got %q, want the native login's token", s.lastAuth())
	}
	mu.Lock()
	if len(got) != 1 || !got[0].Untrusted || got[0].Cluster.Server != s.srv.URL || strings.Join(got[0].Exec.Args, " ") != "get-token --from-profile" {
		t.Errorf("the native login was asked %+v, want one untrusted request for the profile's server, with its argument appended", got)
	}
	mu.Unlock()
	if _, err := h.fleet.RESTConfig(ctx, "inv/late"); err == nil || !strings.Contains(err.Error(), "handlers.AllowNative") {
		t.Errorf("a native login registered after the watch started: %v, want refused by the policy", err)
	}
}

// A status of odd types (what a CRD without a schema lets through) is
// refused by the profile's name, and crashes nothing; a profile that lists
// a provider twice is served by the last of them, as the reference
// library chooses.
func TestProfileStatusOfOddTypes(t *testing.T) {
	s := newSpoke(t)
	p := newTestProvider(t, "test")
	h := newProfileHub(t, ProfilesOptions{Providers: []AccessProvider{p.AccessProvider}})
	odd := map[string]any{
		"string":       "accessProviders",
		"list-map":     map[string]any{"accessProviders": map[string]any{"name": "test"}},
		"entry-number": map[string]any{"accessProviders": []any{int64(42)}},
		"name-null":    map[string]any{"accessProviders": []any{map[string]any{"name": nil, "cluster": s.cluster()}}},
		"server-num":   map[string]any{"accessProviders": []any{map[string]any{"name": "test", "cluster": map[string]any{"server": int64(42)}}}},
		"cluster-str":  map[string]any{"accessProviders": []any{map[string]any{"name": "test", "cluster": "https://x.example"}}},
		"ext-str":      map[string]any{"accessProviders": []any{map[string]any{"name": "test", "cluster": map[string]any{"server": s.srv.URL, "extensions": "x"}}}},
		"ext-null":     map[string]any{"accessProviders": []any{map[string]any{"name": "test", "cluster": s.cluster(ExtraEnvExtension, nil)}}},
		"nested":       map[string]any{"credentialProviders": []any{[]any{[]any{map[string]any{"name": []any{"test"}}}}}},
	}
	for name, status := range odd {
		u := profile("inv", name)
		u.Object["status"] = status
		h.put(t, u)
	}
	twice := profile("inv", "twice", "test", map[string]any{"server": "https://first.example"}, "test", s.cluster())
	h.put(t, twice)
	eventually(t, "every odd profile is logged", func() bool { return strings.Count(h.logs.String(), "ClusterProfile not added") >= len(odd) })
	eventually(t, "the profile that lists its provider twice is added", func() bool { return h.fleet.Vault("inv/twice") != nil })
	if names := h.fleet.Names(); len(names) != 1 {
		t.Errorf("the fleet holds %v, want inv/twice alone", names)
	}
	ctx := ctxFor(t)
	cfg, err := h.fleet.RESTConfig(ctx, "inv/twice")
	if err != nil {
		t.Fatal(err)
	}
	get(t, cfg)
	if s.lastAuth() != "Bearer tok-1" {
		t.Errorf("the last entry's server got %q, want the plugin's token", s.lastAuth())
	}
}
