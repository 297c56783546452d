package fleet

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testpki"
)

// reviewHub is a hub's config for tests that read objects and never mint.
var reviewHub = &rest.Config{Host: "https://hub.example:6443"}

// newFluxWatch is WatchFlux's state without its informer: the tests call
// its event handlers as the informer would.
func newFluxWatch(t *testing.T, f *Fleet, opts FluxOptions) *fluxWatch {
	t.Helper()
	if opts.Config == nil {
		opts.Config = reviewHub
	}
	w := &fluxWatch{fleet: f, opts: opts, client: fake.NewClientset(), served: map[string]*fluxSeat{}, logged: map[string]string{}}
	t.Cleanup(w.closing.Wait)
	return w
}

// A ConfigMap is refused, by its name, for what the login would refuse
// at its first try: a ca.crt that is no PEM (or a path), an audience of
// the hub's own, an address whose query or fragment would move the check
// of the token off /version. A refused value is shown short.
func TestFluxRefusesWhatTheLoginWould(t *testing.T) {
	ca := string(testpki.NewCA(t).PEM)
	const server = "https://member.example:6443"
	base := func(kv ...string) map[string]string {
		d := map[string]string{"provider": "generic", "address": server, "serviceAccountName": "deployer"}
		for i := 0; i+1 < len(kv); i += 2 {
			d[kv[i]] = kv[i+1]
		}
		return d
	}
	for _, c := range []struct {
		name string
		data map[string]string
		want string // "" for none
	}{
		{"a PEM CA", base("ca.crt", ca), ""},
		{"IPv6", base("address", "https://[fd00::1]:6443", "ca.crt", ca), ""},
		{"a path below the address", base("address", server+"/k8s/clusters/c-1"), ""},
		{"a ca.crt that is no PEM", base("ca.crt", "not a certificate"), "TLS settings"},
		{"a ca.crt that is a path", base("ca.crt", "/etc/ssl/certs"), "TLS settings"},
		{"the hub's own audience", base("audiences", "https://kubernetes.default.svc"), "is the hub's own"},
		{"the hub's own among others", base("audiences", "member-1\nkubernetes.default.svc\n"), "is the hub's own"},
		{"a query", base("address", server+"/?x=1"), "query"},
		{"an empty query", base("address", server+"?"), "query"},
		{"a fragment", base("address", server+"#f"), "fragment"},
		{"a huge serviceAccountName", base("serviceAccountName", strings.Repeat("A", 1<<20)), "is not the name of a ServiceAccount"},
		{"a huge provider", base("provider", strings.Repeat("p", 1<<20)), "has no FluxOptions.Providers entry"},
		{"a huge address", base("address", "http://"+strings.Repeat("h", 1<<20)), "is not an https URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readFluxConfigMap(fluxCM("team-a", c.data), FluxOptions{Config: reviewHub, Operator: "flux-system/op"})
			if c.want == "" {
				if err != nil {
					t.Fatalf("got %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Flux ConfigMap team-a/member") {
				t.Fatalf("got %.300v, want an error naming Flux ConfigMap team-a/member and saying %q", err, c.want)
			}
			if len(err.Error()) > 1024 {
				t.Errorf("the error is %d bytes long, want it to quote the ConfigMap's values short", len(err.Error()))
			}
		})
	}
}

// A served ConfigMap that changes to data the login would refuse (a
// ca.crt that is no PEM, the hub's own audience) keeps the data that
// served, as the doc says of every refused change.
func TestFluxChangeToWhatTheLoginRefusesKeepsWhatServed(t *testing.T) {
	logs := &testlog.Buffer{}
	f := New(Options{Logger: logs.Logger(0)})
	defer f.Close()
	w := newFluxWatch(t, f, FluxOptions{})
	good := map[string]string{"provider": "generic", "address": "https://member.example:6443", "serviceAccountName": "deployer", "ca.crt": string(testpki.NewCA(t).PEM)}
	w.upsert(fluxCM("team-a", good))
	fs := w.served["team-a/member"]
	if fs == nil {
		t.Fatalf("the good ConfigMap was not added: %s", logs)
	}
	served := fs.current.Load()
	for _, bad := range []map[string]string{
		{"ca.crt": "not a certificate"},
		{"audiences": "https://kubernetes.default.svc"},
	} {
		data := map[string]string{}
		for k, v := range good {
			data[k] = v
		}
		for k, v := range bad {
			data[k] = v
		}
		w.upsert(fluxCM("team-a", data))
		if w.served["team-a/member"] != fs || fs.current.Load() != served {
			t.Errorf("after a change to %v, the cluster no longer has the data that served", bad)
		}
	}
	if !strings.Contains(logs.String(), "keeps the data that served") {
		t.Errorf("the refused change is not logged: %s", logs)
	}
}

// Out of a pod, with no FluxOptions.Operator, a ConfigMap that names no
// ServiceAccount is refused with an error that says why, not with an
// empty name.
func TestFluxNoOperatorSaysWhy(t *testing.T) {
	_, err := readFluxConfigMap(fluxCM("team-a", map[string]string{"provider": "generic", "address": "https://m.example"}), FluxOptions{Config: reviewHub})
	if err == nil || !strings.Contains(err.Error(), "FluxOptions.Operator") || strings.Contains(err.Error(), "ServiceAccount  ") {
		t.Errorf("got %v, want an error that says no operator ServiceAccount is known (FluxOptions.Operator)", err)
	}
}

// WatchFlux refuses options that cannot serve before it watches: an
// Operator that is not "namespace/name", a ServiceAccount that is no
// ServiceAccount's name.
func TestWatchFluxChecksItsOptions(t *testing.T) {
	f := New(Options{})
	defer f.Close()
	for _, c := range []struct {
		name string
		opts FluxOptions
		want string
	}{
		{"an Operator with no namespace", FluxOptions{Config: reviewHub, Operator: "op"}, "FluxOptions.Operator"},
		{"an Operator of three parts", FluxOptions{Config: reviewHub, Operator: "ns/a/b"}, "FluxOptions.Operator"},
		{"a default of another namespace", FluxOptions{Config: reviewHub, ServiceAccount: "kube-system/default"}, "FluxOptions.ServiceAccount"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := f.WatchFlux(ctx, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error about %s", c.name, err, c.want)
		}
	}
}

// A profile served in process is refused, by name, for what the login
// would refuse at its first try: a CA that is no PEM, a server whose
// default audience is the hub's own.
func TestFederatedProfileRefusesWhatTheLoginWould(t *testing.T) {
	p := AccessProvider{Name: "hub-tokens", Federated: &FederatedAccess{Config: reviewHub, ServiceAccount: "fleet"}}
	ca := testpki.NewCA(t).PEM
	for _, c := range []struct {
		name    string
		cluster map[string]any
		want    string
	}{
		{"good", map[string]any{"server": "https://member.example", "certificate-authority-data": base64.StdEncoding.EncodeToString(ca)}, ""},
		{"no PEM", map[string]any{"server": "https://member.example", "certificate-authority-data": base64.StdEncoding.EncodeToString([]byte("junk"))}, "TLS settings"},
		{"the hub's own audience", map[string]any{"server": "https://kubernetes.default.svc"}, "is the hub's own"},
		{"a query", map[string]any{"server": "https://member.example/?a=b"}, "query"},
	} {
		_, err := accessFor(profile("team-a", "prod", "hub-tokens", c.cluster), []AccessProvider{p})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "ClusterProfile team-a/prod")):
			t.Errorf("%s: got %v, want an error naming the profile and saying %q", c.name, err, c.want)
		}
	}
}

// A ConfigMap's audiences are bounded: ten thousand of them, one of a
// kilobyte or more, are refused, and a ConfigMap of a megabyte of empty
// or one-letter lines is read at once, not in time quadratic in its lines.
func TestFluxAudiencesAreBounded(t *testing.T) {
	many := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "member-%d\n", i)
		}
		return b.String()
	}
	for _, c := range []struct {
		name, audiences, want string
	}{
		{"a few, with empty lines and repeats", "\n member-1 \n\n\nmember-2\nmember-1\n", ""},
		{"ten thousand", many(10000), "audiences"},
		{"ninety thousand, a megabyte", many(90000), "audiences"},
		{"a megabyte of empty lines", strings.Repeat("\n", 1<<20), ""},
		{"a megabyte of one line repeated", strings.Repeat("a\n", 1<<19), ""},
		{"a very long one", strings.Repeat("a", 4096), "audience"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := map[string]string{"provider": "generic", "address": "https://member.example", "serviceAccountName": "deployer", "audiences": c.audiences}
			done := make(chan error, 1)
			go func() {
				_, err := readFluxConfigMap(fluxCM("team-a", data), FluxOptions{Config: reviewHub})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("reading the ConfigMap takes more than 5 s")
			}
			switch {
			case c.want == "" && err != nil:
				t.Errorf("got %v, want none", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error about its %s", err, c.want)
			case err != nil && len(err.Error()) > 1024:
				t.Errorf("the error is %d bytes long", len(err.Error()))
			}
		})
	}
	m, err := readFluxConfigMap(fluxCM("team-a", map[string]string{"provider": "generic", "address": "https://member.example", "serviceAccountName": "deployer", "audiences": "b\na\nb\n"}), FluxOptions{Config: reviewHub})
	if err != nil || strings.Join(m.audiences, ",") != "b,a" {
		t.Errorf("got %q, %v: want each audience once, in the ConfigMap's order", m.audiences, err)
	}
}
