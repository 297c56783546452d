package fleet

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/fakewatch"
	"github.com/authvault/authvault/testkit/testlog"
)

var profilesV1alpha1 = schema.GroupVersionResource{Group: ProfileGroup, Version: "v1alpha1", Resource: "clusterprofiles"}

// profile is a ClusterProfile whose status offers the providers given, each
// a name and its cluster (as the API lays it out: server,
// certificate-authority-data, extensions...).
func profile(namespace, name string, offered ...any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ProfileGroup + "/v1alpha1",
		"kind":       "ClusterProfile",
		"metadata":   map[string]any{"namespace": namespace, "name": name},
		"spec":       map[string]any{"clusterManager": map[string]any{"name": "test"}},
	}}
	var list []any
	for i := 0; i+1 < len(offered); i += 2 {
		list = append(list, map[string]any{"name": offered[i], "cluster": offered[i+1]})
	}
	u.Object["status"] = map[string]any{"accessProviders": list}
	return u
}

// testProvider is a provider whose plugin (a shell script) counts its runs,
// answers the token "tok-<run>", and writes its KUBERNETES_EXEC_INFO and
// the variable PROFILE_VAR to info.
type testProvider struct {
	AccessProvider
	count, info string
}

func newTestProvider(t *testing.T, name string) *testProvider {
	dir := t.TempDir()
	p := &testProvider{count: filepath.Join(dir, "count"), info: filepath.Join(dir, "info")}
	script := filepath.Join(dir, "plugin-"+name)
	body := "#!/bin/sh\nn=$(( $(cat " + p.count + " 2>/dev/null || echo 0) + 1 ))\necho $n > " + p.count + "\n" +
		"printf '%s\\n%s' \"$PROFILE_VAR\" \"$KUBERNETES_EXEC_INFO\" > " + p.info + "\n" +
		"echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-'$n'\"}}'\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	p.AccessProvider = AccessProvider{Name: name, ProfileSourcedEnvVarsPolicy: EnvAppendIfNotExists,
		ExecConfig: &clientcmdapi.ExecConfig{Command: script, APIVersion: execAPIVersionV1, ProvideClusterInfo: true}}
	return p
}

func (p *testProvider) runs() int {
	b, _ := os.ReadFile(p.count)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func (p *testProvider) lastInfo() string {
	b, _ := os.ReadFile(p.info)
	return string(b)
}

// spoke is a cluster's API server: it records the Authorization it gets.
type spoke struct {
	srv *httptest.Server
	ca  string // base64 PEM, as certificate-authority-data
	mu  sync.Mutex
	got []string
}

func newSpoke(t *testing.T) *spoke {
	s := &spoke{}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.got = append(s.got, r.Header.Get("Authorization"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	t.Cleanup(s.srv.Close)
	s.ca = base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw}))
	return s
}

func (s *spoke) cluster(ext ...any) map[string]any {
	c := map[string]any{"server": s.srv.URL, "certificate-authority-data": s.ca}
	var list []any
	for i := 0; i+1 < len(ext); i += 2 {
		list = append(list, map[string]any{"name": ext[i], "extension": ext[i+1]})
	}
	if list != nil {
		c["extensions"] = list
	}
	return c
}

func (s *spoke) lastAuth() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) == 0 {
		return ""
	}
	return s.got[len(s.got)-1]
}

// profileHub is a fake hub's ClusterProfiles with WatchClusterProfiles
// running on them.
type profileHub struct {
	client *dynamicfake.FakeDynamicClient
	fleet  *Fleet
	logs   *testlog.Buffer

	mu             sync.Mutex // guards added, removed and ctxs
	added, removed []string
	ctxs           []context.Context // of OnAdd, in the order of added
}

func newProfileHub(t *testing.T, opts ProfilesOptions) *profileHub {
	return newProfileHubLogging(t, 1, opts)
}

// newProfileHubLogging is newProfileHub with the fleet's log kept up to
// verbosity v.
func newProfileHubLogging(t *testing.T, v int, opts ProfilesOptions) *profileHub {
	h := &profileHub{logs: &testlog.Buffer{}}
	h.client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{profilesV1alpha1: "ClusterProfileList"})
	h.fleet = New(Options{
		Logger: h.logs.Logger(v),
		OnAdd: func(ctx context.Context, m *Member) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.added, h.ctxs = append(h.added, m.Name()), append(h.ctxs, ctx)
		},
		OnRemove: func(m *Member) { h.mu.Lock(); h.removed = append(h.removed, m.Name()); h.mu.Unlock() },
	})
	opts.Client = h.client
	opts.Login = append([]login.Option{login.Backoff(10*time.Millisecond, time.Second)}, opts.Login...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	begun := fakewatch.Begun(&h.client.Fake, h.client.Tracker())
	go func() { done <- h.fleet.WatchClusterProfiles(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		h.fleet.Close()
	})
	if err := begun(); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *profileHub) put(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	c := h.client.Resource(profilesV1alpha1).Namespace(u.GetNamespace())
	if _, err := c.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
		_, err = c.Update(ctx, u, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := c.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// addedCtx is the context OnAdd got for the nth member called name (from
// 1), once OnAdd has been told of it.
func (h *profileHub) addedCtx(t *testing.T, name string, n int) context.Context {
	t.Helper()
	return nthCtx(t, &h.mu, &h.added, &h.ctxs, name, n)
}

func (h *profileHub) events() (added, removed []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.added...), append([]string(nil), h.removed...)
}

// get sends a GET through the cluster's config.
func get(t *testing.T, cfg *rest.Config) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(cfg.Host + "/api")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// A profile adds its cluster, reached through the provider's plugin with
// the profile's server, CA and exec extension as its cluster information
// and the profile's environment; a change of the profile's data refreshes
// the vault (the plugin runs again, with the new data); a profile that
// goes removes its cluster.
func TestWatchClusterProfilesLifecycle(t *testing.T) {
	s := newSpoke(t)
	p := newTestProvider(t, "test")
	h := newProfileHub(t, ProfilesOptions{Providers: []AccessProvider{p.AccessProvider}})

	h.put(t, profile("inv", "east", "other", map[string]any{"server": "https://elsewhere.example"},
		"test", s.cluster(ExecExtension, map[string]any{"region": "eu"}, ExtraEnvExtension, map[string]any{"PROFILE_VAR": "v1"})))
	eventually(t, "the cluster is added", func() bool { return h.fleet.Vault("inv/east") != nil })
	ctx := ctxFor(t)
	cfg, err := h.fleet.RESTConfig(ctx, "inv/east")
	if err != nil {
		t.Fatal(err)
	}
	get(t, cfg)
	if got := s.lastAuth(); got != "Bearer tok-1" {
		t.Errorf("the cluster got %q, want the plugin's first token", got)
	}
	info := p.lastInfo()
	if !strings.HasPrefix(info, "v1\n") || !strings.Contains(info, `"server":"`+s.srv.URL+`"`) || !strings.Contains(info, `"config":{"region":"eu"}`) {
		t.Errorf("the plugin got PROFILE_VAR and KUBERNETES_EXEC_INFO:\n%s\nwant v1, the profile's server and its exec extension", info)
	}

	h.put(t, profile("inv", "east", "test", s.cluster(ExecExtension, map[string]any{"region": "eu"}, ExtraEnvExtension, map[string]any{"PROFILE_VAR": "v2"})))
	eventually(t, "the plugin runs again with the profile's new data", func() bool { return strings.HasPrefix(p.lastInfo(), "v2\n") })
	eventually(t, "the new token serves", func() bool { get(t, cfg); return s.lastAuth() == "Bearer tok-2" })
	again, err := h.fleet.RESTConfig(ctx, "inv/east")
	if err != nil || again != cfg {
		t.Errorf("the cluster's config after the change: %p, %v, want the same %p", again, err, cfg)
	}

	runs := p.runs()
	h.put(t, profile("inv", "east", "test", s.cluster(ExecExtension, map[string]any{"region": "eu"}, ExtraEnvExtension, map[string]any{"PROFILE_VAR": "v2"})))
	time.Sleep(100 * time.Millisecond) // a resync's worth: nothing is to happen
	if p.runs() != runs {
		t.Errorf("an update that changes nothing ran the plugin")
	}

	if err := h.client.Resource(profilesV1alpha1).Namespace("inv").Delete(ctx, "east", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The cluster leaves the fleet (Vault is nil) before OnRemove is told:
	// wait for OnRemove, then for a later profile's OnAdd, which the watch
	// calls after any OnRemove of the delete's.
	eventually(t, "the cluster is removed", func() bool { return h.fleet.Vault("inv/east") == nil })
	h.put(t, profile("inv", "barrier", "test", s.cluster()))
	h.addedCtx(t, "inv/barrier", 1)
	added, removed := h.events()
	if strings.Join(added, ",") != "inv/east,inv/barrier" || strings.Join(removed, ",") != "inv/east" {
		t.Errorf("OnAdd %v, OnRemove %v, want inv/east once each (and the later inv/barrier added)", added, removed)
	}
}

// A profile that offers no provider of the file, or whose data cannot
// serve, is not added and runs nothing; the log names the profile and what
// is wrong, never the profile's server, user info or CA. A served profile
// whose data turns bad keeps the data that served.
func TestWatchClusterProfilesRefusesWhatCannotServe(t *testing.T) {
	s := newSpoke(t)
	p := newTestProvider(t, "test")
	h := newProfileHub(t, ProfilesOptions{Providers: []AccessProvider{p.AccessProvider}})

	bad := map[string]map[string]any{
		"other-provider": nil,
		"http":           {"server": "http://plain.example:8080"},
		"userinfo":       {"server": "https://admin:hunter2@userinfo.example"},
		"cafile":         {"server": s.srv.URL, "certificate-authority": "/etc/kubernetes/pki/ca.crt"},
		"insecure":       {"server": s.srv.URL, "insecure-skip-tls-verify": true},
		"proxy":          {"server": s.srv.URL, "proxy-url": "http://u:proxypass@proxy.example"},
		"args":           s.cluster(ExtraArgsExtension, map[string]any{"not": "a list"}),
	}
	for name, cluster := range bad {
		if cluster == nil {
			h.put(t, profile("inv", name, "unknown", s.cluster()))
			continue
		}
		h.put(t, profile("inv", name, "test", cluster))
	}
	eventually(t, "every bad profile is logged", func() bool { return strings.Count(h.logs.String(), "ClusterProfile not added") >= len(bad) })
	want := map[string]string{
		"other-provider": "none of its access providers is in the provider file (it offers",
		"http":           "not an https:// URL",
		"userinfo":       "carries user info",
		"cafile":         "names a file of this machine",
		"insecure":       "insecure-skip-tls-verify is set",
		"proxy":          "proxy-url is not a URL without user info",
		"args":           "is not a list of strings",
	}
	out := h.logs.String()
	for name, text := range want {
		if !strings.Contains(out, "ClusterProfile inv/"+name) || !strings.Contains(out, text) {
			t.Errorf("the log does not say that inv/%s is refused because %q", name, text)
		}
	}
	for _, secret := range []string{"hunter2", "proxypass", "plain.example", "/etc/kubernetes", s.ca[:40]} {
		if strings.Contains(out, secret) {
			t.Errorf("the log shows %q", secret)
		}
	}
	if n := len(h.fleet.Names()); n != 0 || p.runs() != 0 {
		t.Errorf("%d clusters added, the plugin ran %d times: want none", n, p.runs())
	}

	// Served, then broken: it keeps serving with the data that served.
	h.put(t, profile("inv", "good", "test", s.cluster()))
	eventually(t, "the good profile is added", func() bool { return h.fleet.Vault("inv/good") != nil })
	h.put(t, profile("inv", "good", "test", map[string]any{"server": "http://plain.example:8080"}))
	eventually(t, "the change is logged", func() bool { return strings.Contains(h.logs.String(), "keeps the data that served") })
	ctx := ctxFor(t)
	cfg, err := h.fleet.RESTConfig(ctx, "inv/good")
	if err != nil {
		t.Fatal(err)
	}
	get(t, cfg)
	if s.lastAuth() != "Bearer tok-1" {
		t.Errorf("the cluster got %q, want the plugin's token at the server that served", s.lastAuth())
	}
}

// The access provider chosen is the file's first that the profile offers;
// an accessProviders entry wins over a credentialProviders one of its name;
// the profile's arguments and environment are used as the provider's
// policies say.
func TestAccessFor(t *testing.T) {
	exec := func(args ...string) *clientcmdapi.ExecConfig {
		return &clientcmdapi.ExecConfig{Command: "p", APIVersion: execAPIVersionV1, Args: args,
			Env: []clientcmdapi.ExecEnvVar{{Name: "OWN", Value: "own"}}}
	}
	cluster := func(server string) map[string]any {
		return map[string]any{"server": server, "extensions": []any{
			map[string]any{"name": ExtraArgsExtension, "extension": []any{"cluster=x"}}, // no flag: the provider's env may stand for any
			map[string]any{"name": ExtraEnvExtension, "extension": map[string]any{"OWN": "profile's", "NEW": "new"}},
		}}
	}
	u := profile("ns", "p", "b", cluster("https://b.example"), "a", cluster("https://a.example"))
	u.Object["status"].(map[string]any)["credentialProviders"] = []any{
		map[string]any{"name": "a", "cluster": cluster("https://old-a.example")},
		map[string]any{"name": "c", "cluster": cluster("https://c.example")},
	}
	for _, tt := range []struct {
		providers  []AccessProvider
		server     string
		args, envs string
	}{
		{[]AccessProvider{{Name: "a", ExecConfig: exec()}, {Name: "b", ExecConfig: exec()}}, "https://a.example", "", "OWN=own"},
		{[]AccessProvider{{Name: "z", ExecConfig: exec()}, {Name: "c", ExecConfig: exec("--v")}}, "https://c.example", "--v", "OWN=own"},
		{[]AccessProvider{{Name: "b", ExecConfig: exec("get-token"), ProfileSourcedCLIArgsPolicy: ArgsAppend, ProfileSourcedEnvVarsPolicy: EnvAppendIfNotExists}},
			"https://b.example", "get-token cluster=x", "OWN=own NEW=new"},
		{[]AccessProvider{{Name: "b", ExecConfig: exec(), ProfileSourcedCLIArgsPolicy: ArgsIgnore, ProfileSourcedEnvVarsPolicy: EnvReplace}},
			"https://b.example", "", "OWN=profile's NEW=new"},
	} {
		a, err := accessFor(u, tt.providers)
		if err != nil {
			t.Fatal(err)
		}
		var envs []string
		for _, e := range a.exec.Env {
			envs = append(envs, e.Name+"="+e.Value)
		}
		if a.cluster.Server != tt.server || strings.Join(a.exec.Args, " ") != tt.args || strings.Join(envs, " ") != tt.envs {
			t.Errorf("%s: got %s, args %q, env %q; want %s, %q, %q", tt.providers[0].Name, a.cluster.Server, a.exec.Args, envs, tt.server, tt.args, tt.envs)
		}
		if _, ok := a.cluster.Extensions[ExtraArgsExtension]; ok {
			t.Error("the reserved extensions reach the kubeconfig's cluster")
		}
	}
	if tt := exec(); tt.Env[0].Value != "own" {
		t.Error("the provider's own env was changed")
	}
}

// The version read is the one the hub prefers among those the watch reads;
// v1alpha1 when the hub serves no ClusterProfile (yet), or only versions the
// watch does not know.
func TestPreferredProfileVersion(t *testing.T) {
	for _, tt := range []struct {
		name, groups, want string
	}{
		{"v1beta1 preferred", `[{"name":"multicluster.x-k8s.io","versions":[{"groupVersion":"multicluster.x-k8s.io/v1beta1","version":"v1beta1"},{"groupVersion":"multicluster.x-k8s.io/v1alpha1","version":"v1alpha1"}],"preferredVersion":{"groupVersion":"multicluster.x-k8s.io/v1beta1","version":"v1beta1"}}]`, "v1beta1"},
		{"v1alpha1 only", `[{"name":"multicluster.x-k8s.io","versions":[{"groupVersion":"multicluster.x-k8s.io/v1alpha1","version":"v1alpha1"}],"preferredVersion":{"groupVersion":"multicluster.x-k8s.io/v1alpha1","version":"v1alpha1"}}]`, "v1alpha1"},
		{"an unknown version preferred", `[{"name":"multicluster.x-k8s.io","versions":[{"groupVersion":"multicluster.x-k8s.io/v2","version":"v2"},{"groupVersion":"multicluster.x-k8s.io/v1beta1","version":"v1beta1"}],"preferredVersion":{"groupVersion":"multicluster.x-k8s.io/v2","version":"v2"}}]`, "v1beta1"},
		{"no such group", `[]`, "v1alpha1"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/api":
				_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"]}`))
			case "/apis":
				_, _ = w.Write([]byte(`{"kind":"APIGroupList","apiVersion":"v1","groups":` + tt.groups + `}`))
			default:
				http.NotFound(w, r)
			}
		}))
		got := preferredVersion(&rest.Config{Host: srv.URL})
		srv.Close()
		if got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// A profile of v1beta1 serves as one of v1alpha1 does; a version the watch
// does not know is refused at the start.
func TestWatchClusterProfilesV1beta1(t *testing.T) {
	s := newSpoke(t)
	p := newTestProvider(t, "test")
	gvr := schema.GroupVersionResource{Group: ProfileGroup, Version: "v1beta1", Resource: "clusterprofiles"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ClusterProfileList"})
	f := New(Options{})
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	begun := fakewatch.Begun(&client.Fake, client.Tracker())
	go func() {
		done <- f.WatchClusterProfiles(ctx, ProfilesOptions{Client: client, Version: "v1beta1", Providers: []AccessProvider{p.AccessProvider}})
	}()
	defer func() { cancel(); <-done }()
	if err := begun(); err != nil {
		t.Fatal(err)
	}
	u := profile("inv", "beta", "test", s.cluster())
	u.SetAPIVersion(ProfileGroup + "/v1beta1")
	if _, err := client.Resource(gvr).Namespace("inv").Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the v1beta1 profile's cluster is added", func() bool { return f.Vault("inv/beta") != nil })
	cfg, err := f.RESTConfig(ctx, "inv/beta")
	if err != nil {
		t.Fatal(err)
	}
	get(t, cfg)
	if s.lastAuth() != "Bearer tok-1" {
		t.Errorf("the cluster got %q", s.lastAuth())
	}

	err = f.WatchClusterProfiles(ctx, ProfilesOptions{Client: client, Version: "v2", Providers: []AccessProvider{p.AccessProvider}})
	if err == nil || !strings.Contains(err.Error(), `Version "v2" is not one of`) {
		t.Errorf("version v2: %v, want a refusal", err)
	}
	if err := f.WatchClusterProfiles(ctx, ProfilesOptions{Client: client}); err == nil || !strings.Contains(err.Error(), "no providers") {
		t.Errorf("no providers: %v, want a refusal", err)
	}
}

// Under Append a profile adds flags, but sets none that the provider's own
// arguments set: the operator's --region and --role-arn stay theirs.
func TestProfileArgsDoNotOverrideTheProvidersOwn(t *testing.T) {
	provider := AccessProvider{Name: "eks", ProfileSourcedCLIArgsPolicy: ArgsAppend, ExecConfig: &clientcmdapi.ExecConfig{
		Command: "aws", APIVersion: execAPIVersionV1, Args: []string{"--region", "eu-west-1", "eks", "get-token", "--role-arn=arn:aws:iam::1:role/reader"}}}
	for _, tt := range []struct {
		args []any
		want string // the error's flag, or "" for none
	}{
		{[]any{"--cluster-name", "prod"}, ""},
		{[]any{"--cluster-name", "prod", "--region", "us-east-1"}, `"--region"`},
		{[]any{"--role-arn=arn:aws:iam::1:role/admin"}, `"--role-arn"`},
		{[]any{"--cluster-name", "--region=x"}, `"--region"`},
	} {
		u := profile("ns", "p", "eks", map[string]any{"server": "https://a.example", "extensions": []any{
			map[string]any{"name": ExtraArgsExtension, "extension": tt.args},
		}})
		_, err := accessFor(u, []AccessProvider{provider})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want+", which the provider's own arguments set")):
			t.Errorf("%q: %v, want %s refused", tt.args, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "admin"):
			t.Errorf("the error quotes the profile's value: %v", err)
		}
	}
}
