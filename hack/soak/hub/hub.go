// Package hub is the soak's world: an embedded kube-apiserver and etcd
// whose tokens come from a webhook issuer, the credentials the sides use
// (a token file, a token endpoint per side that their exec plugin fetches
// from, the fleet's kubeconfig Secrets and ClusterProfiles), kept rotating
// as their owners would rotate them, and the faults the soak puts them
// through.
//
// # What rotates all the time
//
// Every token lives between Options.MinTokenLife and MaxTokenLife. The
// token file and each kubeconfig Secret are rewritten two thirds into
// their token's life, as a kubelet rewrites a projected token and Cluster
// API a kubeconfig; the plugin's tokens come fresh from its endpoint each
// run.
//
// # Faults
//
// Each fault method causes one fault and returns what it may break
// (report.Fault), for the report to explain the failures callers saw.
package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/hack/soak/wire"
	"github.com/authvault/authvault/testkit/testcluster"
)

// Options configure the hub.
type Options struct {
	Dir    string // where files go; it must exist
	Binary string // the soak's binary: the sides' exec plugin
	// SecretClusters and ProfileClusters are the fleet's clusters from
	// kubeconfig Secrets and from ClusterProfiles.
	SecretClusters, ProfileClusters int
	// MinTokenLife and MaxTokenLife bound every token's life.
	MinTokenLife, MaxTokenLife time.Duration
	// PluginLatency is how long each run of the exec plugin takes.
	PluginLatency time.Duration
	Workers       int
	SampleEvery   time.Duration
	Logf          func(format string, args ...any)
}

// Hub is the soak's world. Its methods are safe for concurrent use.
type Hub struct {
	opts      Options
	cluster   *testcluster.Cluster
	caFile    string
	tokenFile string
	endpoints map[string]*endpoint // by side

	mu             sync.Mutex // guards caData, clients, tokens, tokenFile*
	caData         []byte
	clients        *clients // for caData
	tokens         map[string]bool
	tokenFileToken string    // the token file's token
	tokenFileNext  time.Time // when it is rewritten

	members *members
	probe   probe
	issuers []string // the API server's service-account issuers, newest first
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

type clients struct {
	core kubernetes.Interface
	dyn  dynamic.Interface
}

// Sides are the roles the hub serves, each with a namespace, a pod, a
// token endpoint and a provider file of its own.
var Sides = []string{wire.RoleAuthvault, wire.RoleClientGo, wire.RoleShardPeer}

// Start starts the API server and everything around it.
func Start(ctx context.Context, opts Options) (*Hub, error) {
	cluster, err := testcluster.Start()
	if err != nil {
		return nil, err
	}
	// A stopping kube-apiserver waits for its open connections up to its
	// request timeout (a minute by default), and the sides' watches keep
	// theirs open: a restart took a minute and more, past envtest's bound
	// on a stop. A LIST here takes milliseconds: ten seconds are plenty,
	// and they bound the restart's stop. Restarted once at once, with no
	// watch open yet, to take the flag.
	cluster.Env.ControlPlane.GetAPIServer().Configure().Set("request-timeout", "10s")
	if err := cluster.RestartAPIServer(0); err != nil {
		_ = cluster.Stop()
		return nil, err
	}
	h := &Hub{opts: opts, cluster: cluster, tokens: map[string]bool{}, caData: cluster.CAData,
		caFile: filepath.Join(opts.Dir, "ca.crt"), tokenFile: filepath.Join(opts.Dir, "token"),
		endpoints: map[string]*endpoint{}}
	if err := h.setup(ctx); err != nil {
		h.Stop()
		return nil, err
	}
	return h, nil
}

func (h *Hub) setup(ctx context.Context) error {
	if err := writeFile(h.caFile, h.caData); err != nil {
		return err
	}
	issuer, err := h.issuer(ctx)
	if err != nil {
		return err
	}
	h.issuers = []string{issuer}
	for _, side := range Sides {
		h.endpoints[side] = newEndpoint(h, h.opts.PluginLatency)
		if err := h.sideObjects(ctx, side); err != nil {
			return err
		}
	}
	if h.members, err = newMembers(ctx, h); err != nil {
		return err
	}
	ctx, h.stop = context.WithCancel(context.Background())
	if err := h.rotateTokenFile(); err != nil {
		return err
	}
	h.wg.Go(func() { h.tokenFileLoop(ctx) })
	h.members.start(ctx)
	return nil
}

// issuer is the API server's service-account issuer now.
func (h *Hub) issuer(ctx context.Context) (string, error) {
	raw, err := h.client().core.Discovery().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("hub: the API server's OIDC discovery: %w", err)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Issuer == "" {
		return "", fmt.Errorf("hub: the API server's OIDC discovery names no issuer")
	}
	return doc.Issuer, nil
}

// sideObjects makes a side's namespace, its Pod that no node runs and its
// provider file.
func (h *Hub) sideObjects(ctx context.Context, side string) error {
	c := h.client().core
	ns := "soak-" + side
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("hub: namespace %s: %w", ns, err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "idle"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("hub: pod %s/idle: %w", ns, err)
	}
	providers := map[string]any{"providers": []any{map[string]any{
		"name": ProviderName,
		"execConfig": map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1", "command": h.opts.Binary, "provideClusterInfo": true,
			"env": []any{
				map[string]any{"name": wire.RoleEnv, "value": wire.RolePlugin},
				map[string]any{"name": wire.PluginURLEnv, "value": h.endpoints[side].srv.URL},
			},
		},
	}}}
	raw, _ := json.Marshal(providers)
	return writeFile(h.providerFile(side), raw)
}

// ProviderName is the access provider every ClusterProfile offers.
const ProviderName = "soak-plugin"

func (h *Hub) providerFile(side string) string {
	return filepath.Join(h.opts.Dir, side+"-providers.json")
}

// Config is what a side gets.
func (h *Hub) Config(side string) wire.Config {
	cfg := wire.Config{
		Side: side, Server: h.cluster.Server, CAFile: h.caFile, TokenFile: h.tokenFile,
		PluginCommand: h.opts.Binary,
		PluginEnv:     map[string]string{wire.RoleEnv: wire.RolePlugin, wire.PluginURLEnv: h.endpoints[side].srv.URL},
		Namespace:     "soak-" + side, Pod: "idle",
		SecretsNamespace: secretsNamespace, ProfilesNamespace: profilesNamespace, ProviderFile: h.providerFile(side),
		AddonAudience: "addon.soak.svc", Workers: h.opts.Workers, SampleEvery: h.opts.SampleEvery,
		LogFile: filepath.Join(h.opts.Dir, side+".log"),
	}
	if side == wire.RoleAuthvault || side == wire.RoleShardPeer {
		// One fleet in two processes, on Leases in the authvault side's
		// namespace.
		cfg.ShardGroup, cfg.ShardNamespace = "soak", "soak-"+wire.RoleAuthvault
		cfg.FleetOnly = side == wire.RoleShardPeer
	}
	return cfg
}

// PluginRuns is how many times a side's plugin fetched from its endpoint.
func (h *Hub) PluginRuns(side string) int64 { return h.endpoints[side].hits.Load() }

// Clusters is the fleet's size.
func (h *Hub) Clusters() int { return h.opts.SecretClusters + h.opts.ProfileClusters }

// issue is a new token of the issuer's, remembered for the leak scan.
func (h *Hub) issue(life time.Duration) string {
	tok := h.cluster.Issuer.Issue(life)
	h.mu.Lock()
	h.tokens[tok] = true
	h.mu.Unlock()
	return tok
}

// tokenPattern matches what the issuer's tokens look like, and a piece of
// one eight characters long or more.
var tokenPattern = regexp.MustCompile(`av-[0-9a-f]{8,}`)

// jwtPattern matches a JWT's header and claims: the ServiceAccount tokens
// the addon callers request from the API server, which the hub does not
// issue and so cannot list. A side has no reason to write one.
var jwtPattern = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}`)

// Leaks says where in text a token the hub issued, or a piece of one, or
// any JWT appears: a description per hit, never the token.
func (h *Hub) Leaks(source string, text []byte) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, loc := range tokenPattern.FindAllIndex(text, -1) {
		// The match runs on over any hex that follows the token.
		piece := string(text[loc[0]:loc[1]])
		for tok := range h.tokens {
			if n := min(len(tok), len(piece)); tok[:n] == piece[:n] {
				out = append(out, fmt.Sprintf("%s: an issued token (or its first %d characters) at byte %d", source, n, loc[0]))
				break
			}
		}
	}
	for _, loc := range jwtPattern.FindAllIndex(text, -1) {
		out = append(out, fmt.Sprintf("%s: a JWT (a ServiceAccount token's header and claims at least) at byte %d", source, loc[0]))
	}
	return out
}

// client is the harness's own access: a token that never expires, for the
// serving CA of the moment.
func (h *Hub) client() *clients {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clients == nil {
		tok := h.cluster.Issuer.Issue(0)
		cfg := &rest.Config{Host: h.cluster.Server, BearerToken: tok, TLSClientConfig: rest.TLSClientConfig{CAData: h.caData},
			QPS: 100, Burst: 200, Timeout: 30 * time.Second}
		h.clients = &clients{core: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
	}
	return h.clients
}

// Stop stops the rotations, the endpoints and the API server.
func (h *Hub) Stop() {
	if h.stop != nil {
		h.stop()
	}
	h.wg.Wait()
	if h.members != nil {
		h.members.wait()
	}
	for _, e := range h.endpoints {
		e.close()
	}
	_ = h.cluster.Stop()
}

// writeFile replaces path's content at once, as kubelet swaps a projected
// volume: a reader never sees half a file.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

var getOptions = metav1.GetOptions{}
