package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/testkit/testcluster"
)

// The walk-through's names: the APIService v1.dashboard.authvault.dev on
// the Service authvault-dashboard/addon-proxy, whose DNS name the serving
// certificate of addon-proxy carries.
const (
	dashGroup     = "dashboard.authvault.dev"
	dashVersion   = "v1"
	dashNamespace = "authvault-dashboard"
	dashService   = "addon-proxy"
	// dashRole is the ClusterRole a person needs to use the dashboard:
	// list (the page, GET .../notes), watch (its WebSocket, with
	// ?watch=1) and create (POST .../notes) on notes.dashboard.authvault.dev,
	// and list on configmaps.dashboard.authvault.dev (GET .../configmaps,
	// the page that lists the core ConfigMaps the person may list).
	dashRole = "dashboard-user"
)

// Bounds on the walk-through's steps: past one, the program says which step
// and why, and stops.
const (
	// availableWithin is how long the aggregator may take to call the
	// APIService Available: its discovery probe of addon-proxy.
	availableWithin = time.Minute
	// startWithin is how long a process may take to serve.
	startWithin = time.Minute
	// stopWithin is how long a process may take to end after SIGTERM,
	// before SIGKILL.
	stopWithin = 10 * time.Second
	// buildTick is how often a build says it is still going.
	buildTick = 20 * time.Second
)

// walkThrough is the browser walk-through beside the cluster: addon-proxy,
// examples/dashboard and kubectl proxy, and the directory of their binaries
// and addon-proxy's serving certificate.
type walkThrough struct {
	// Set by startWalkThrough, then read only.
	tmp      string
	url      string // the page, through kubectl proxy
	port     int    // kubectl proxy's
	kubectl  string // which kubectl proxy runs, for the guide
	addon    string // addon-proxy's address
	upstream string // the dashboard's address

	procs    []*proc    // in start order: stop ends them in reverse
	exited   chan *proc // a process that ended before stop; room for all
	stopping atomic.Bool
}

// proc is a process of the walk-through, in a process group of its own:
// the terminal's Ctrl-C reaches the program alone, which stops the
// processes in order.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited; err is set before
	err  error
}

// checkProxyPort tells whether kubectl proxy can listen on port of
// 127.0.0.1.
func checkProxyPort(port int) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("--proxy-port %d is no TCP port", port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d of 127.0.0.1 is in use (another kubectl proxy?), and the walk-through's kubectl proxy listens there: stop what holds it, or pick another port: make dashboard DASHBOARD_PROXY_PORT=%d (--proxy-port): %w", port, port+1, err)
	}
	return l.Close()
}

// startWalkThrough builds and starts the walk-through on c. Whatever it
// returns that is not nil, with an error or without, must be stopped.
func startWalkThrough(ctx context.Context, c *testcluster.Cluster, kubeconfig string, proxyPort int, out io.Writer) (*walkThrough, error) {
	tmp, err := os.MkdirTemp("", "authvault-dashboard-")
	if err != nil {
		return nil, err
	}
	w := &walkThrough{tmp: tmp, port: proxyPort, exited: make(chan *proc, 3)}
	w.url = fmt.Sprintf("http://127.0.0.1:%d/apis/%s/%s/notes", proxyPort, dashGroup, dashVersion)

	fmt.Fprintln(out, "building addon-proxy and examples/dashboard (a fresh clone compiles the Kubernetes libraries they use first: a few minutes on two cores) ...")
	if err := build(ctx, out, tmp, "github.com/authvault/authvault/cmd/addon-proxy", "github.com/authvault/authvault/examples/dashboard"); err != nil {
		return w, err
	}

	fmt.Fprintf(out, "making %s (group %s), who may list the ConfigMaps of %s and not those of %s, and the dashboard's own identity, which may act as people only to list ConfigMaps (deploy/dashboard) ...\n", person, personGroup, teamA, teamB)
	aliceConfig, dashConfig, err := setUpPeople(ctx, c, tmp)
	if err != nil {
		return w, err
	}

	// The dashboard serves addon-proxy over TLS, for the name localhost,
	// and trusts the identity it forwards only over addon-proxy's client
	// certificate.
	dashCA, err := testcluster.WriteCertificate("localhost", x509.ExtKeyUsageServerAuth, filepath.Join(tmp, "dashboard.crt"), filepath.Join(tmp, "dashboard.key"))
	if err != nil {
		return w, err
	}
	clientCA, err := testcluster.WriteCertificate("addon-proxy", x509.ExtKeyUsageClientAuth, filepath.Join(tmp, "addon-proxy-client.crt"), filepath.Join(tmp, "addon-proxy-client.key"))
	if err != nil {
		return w, err
	}
	for name, pem := range map[string][]byte{"dashboard-ca.crt": dashCA, "addon-proxy-client-ca.crt": clientCA} {
		if err := os.WriteFile(filepath.Join(tmp, name), pem, 0o600); err != nil {
			return w, err
		}
	}
	if w.upstream, err = freeAddr(); err != nil {
		return w, err
	}
	_, dashPort, _ := net.SplitHostPort(w.upstream)
	origin := func(host string) string { return fmt.Sprintf("http://%s:%d", host, proxyPort) }
	origins := origin("127.0.0.1") + "," + origin("localhost")
	fmt.Fprintf(out, "starting examples/dashboard on %s ...\n", w.upstream)
	dash, err := w.start(out, "dashboard", filepath.Join(tmp, "dashboard"), "--listen", w.upstream,
		"--tls-cert-file", filepath.Join(tmp, "dashboard.crt"), "--tls-key-file", filepath.Join(tmp, "dashboard.key"),
		"--proxy-client-ca-file", filepath.Join(tmp, "addon-proxy-client-ca.crt"),
		"--kubeconfig", dashConfig, "--namespace", teamA, "--trusted-origins", origins)
	if err != nil {
		return w, err
	}
	if err := w.waitHTTP(ctx, dash, "https://localhost:"+dashPort+"/healthz", dashCA); err != nil {
		return w, err
	}

	// The aggregator dials the Service's name, localhost by its
	// ExternalName, and verifies the name it dialed in the certificate.
	host := dashService + "." + dashNamespace + ".svc"
	ca, err := testcluster.WriteCertificate(host, x509.ExtKeyUsageServerAuth, filepath.Join(tmp, "tls.crt"), filepath.Join(tmp, "tls.key"))
	if err != nil {
		return w, err
	}
	if w.addon, err = freeAddr(); err != nil {
		return w, err
	}
	ops, err := freeAddr()
	if err != nil {
		return w, err
	}
	_, addonPort, _ := net.SplitHostPort(w.addon)
	fmt.Fprintf(out, "starting addon-proxy on %s, its serving certificate for %s ...\n", w.addon, host)
	addon, err := w.start(out, "addon-proxy", filepath.Join(tmp, "addon-proxy"),
		"--apiservice", dashGroup+"/"+dashVersion,
		"--upstream", "https://localhost:"+dashPort, "--audience", host,
		"--upstream-ca-file", filepath.Join(tmp, "dashboard-ca.crt"),
		"--upstream-client-cert-file", filepath.Join(tmp, "addon-proxy-client.crt"),
		"--upstream-client-key-file", filepath.Join(tmp, "addon-proxy-client.key"),
		// Its vault logs in with the cluster's kubeconfig, and reads the
		// front proxy's CA from kube-system's ConfigMap through it.
		"--kubeconfig", kubeconfig,
		"--listen", w.addon, "--ops-listen", ops,
		"--tls-cert-file", filepath.Join(tmp, "tls.crt"), "--tls-key-file", filepath.Join(tmp, "tls.key"),
		// The pages of kubectl proxy may post notes: the browser's
		// Origin is the proxy's, of either name.
		"--trusted-origins", origins,
		"--shutdown-grace", "2s")
	if err != nil {
		return w, err
	}
	if err := w.waitHTTP(ctx, addon, "http://"+ops+"/readyz", nil); err != nil {
		return w, err
	}

	fmt.Fprintf(out, "registering the APIService v1.%s on the Service %s/%s (ExternalName localhost, port %s) ...\n", dashGroup, dashNamespace, dashService, addonPort)
	port, _ := strconv.Atoi(addonPort)
	if err := register(ctx, c, port, ca); err != nil {
		return w, err
	}
	fmt.Fprintln(out, "waiting for the aggregator to call it Available (its discovery probe of addon-proxy) ...")
	if err := waitAvailable(ctx, c); err != nil {
		return w, err
	}

	if w.kubectl, err = kubectlPath(); err != nil {
		return w, err
	}
	fmt.Fprintf(out, "starting kubectl proxy (%s) on 127.0.0.1:%d ...\n", w.kubectl, proxyPort)
	serving := make(chan struct{})
	var once sync.Once
	kubectl, err := w.startWatched(out, "kubectl proxy", func(line string) {
		if strings.HasPrefix(line, "Starting to serve on ") {
			once.Do(func() { close(serving) })
		}
	}, w.kubectl, "proxy", "--port", strconv.Itoa(proxyPort), "--address", "127.0.0.1", "--kubeconfig", aliceConfig)
	if err != nil {
		return w, err
	}
	select {
	case <-serving:
	case <-kubectl.done:
		return w, fmt.Errorf("kubectl proxy exited (%v) before it served: its lines above say why", kubectl.err)
	case <-time.After(startWithin):
		return w, fmt.Errorf("kubectl proxy does not serve after %v", startWithin)
	case <-ctx.Done():
		return w, ctx.Err()
	}
	// The page itself, as the browser will get it: the guide promises it.
	if err := checkPage(ctx, w.url); err != nil {
		return w, err
	}
	return w, nil
}

// printGuide says what to open, what it shows and how it got there.
func (w *walkThrough) printGuide(out io.Writer) {
	configMaps := strings.TrimSuffix(w.url, "notes") + "configmaps"
	fmt.Fprintf(out, `
The dashboard is up. Open this page in a browser:

    %s

It says "signed in as %s": kubectl proxy runs with her kubeconfig,
%s,
a client certificate in group %s, which the API server authenticates.
examples/dashboard never sees a credential of hers: addon-proxy names her,
and the dashboard believes it only over addon-proxy's client certificate.
Add a note: it is kept under her name. Then follow "The ConfigMaps you may
see":

    %s

The dashboard lists them as her (Impersonate-User, by its own credential),
so the API server's RBAC decides: %s's ConfigMaps are listed, and
?namespace=%s gets the API server's refusal, as a page that says what she
may not do. Its RBAC is deploy/dashboard/impersonate-constrained.yaml: it
may act as people only to list ConfigMaps.

On the way:
  kubectl proxy       127.0.0.1:%d (%s): adds %s's client certificate
  kube-apiserver      authenticates her, checks RBAC (ClusterRole %s: list,
                      watch and create on notes.%s, list on
                      configmaps.%s), forwards through its aggregation
                      layer to the APIService v1.%s
                      (Service %s/%s, ExternalName localhost)
  addon-proxy         %s: trusts X-Remote-User only over the API
                      server's front-proxy client certificate
  examples/dashboard  %s: trusts addon-proxy's headers only over its
                      client certificate; lists ConfigMaps as %s,
                      logged in as %s

Ctrl-C stops it all.
`, w.url, person, filepath.Join(w.tmp, person+".kubeconfig"), personGroup, configMaps, teamA, teamB,
		w.port, w.kubectl, person, dashRole, dashGroup, dashGroup, dashGroup, dashNamespace, dashService, w.addon, w.upstream, person, dashboardUser)
}

// stop ends the processes, the last started first, each with SIGTERM and
// after stopWithin with SIGKILL, waits for them, and removes the
// temporary directory.
func (w *walkThrough) stop() error {
	w.stopping.Store(true)
	for i := len(w.procs) - 1; i >= 0; i-- {
		p := w.procs[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopWithin):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	return os.RemoveAll(w.tmp)
}

// start starts a process of the walk-through, its lines on out under its
// name.
func (w *walkThrough) start(out io.Writer, name, bin string, args ...string) (*proc, error) {
	return w.startWatched(out, name, nil, bin, args...)
}

// startWatched is start, with each line the process prints also given to
// onLine.
func (w *walkThrough) startWatched(out io.Writer, name string, onLine func(string), bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	lines := &prefixWriter{out: out, prefix: name + " | ", onLine: onLine}
	// One writer for both: exec then writes to it from one goroutine.
	cmd.Stdout, cmd.Stderr = lines, lines
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	w.procs = append(w.procs, p)
	go func() {
		p.err = cmd.Wait()
		lines.flush()
		close(p.done)
		if !w.stopping.Load() {
			w.exited <- p
		}
	}()
	return p, nil
}

// waitHTTP waits until url answers 200, p exits or startWithin passes; an
// https url's server is verified against ca.
func (w *walkThrough) waitHTTP(ctx context.Context, p *proc, url string, ca []byte) error {
	transport := &http.Transport{DisableKeepAlives: true}
	if ca != nil {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		transport.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: transport}
	deadline := time.Now().Add(startWithin)
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before it served: its lines above say why", p.name, p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not ready after %v: GET %s: %s", p.name, startWithin, url, last)
		}
	}
}

// build builds the packages' commands into dir with one go command (two
// would each compile the packages they share), saying every buildTick that
// it is still at it.
func build(ctx context.Context, out io.Writer, dir string, pkgs ...string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("building addon-proxy and examples/dashboard: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(buildTick)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("building addon-proxy and examples/dashboard: %w\n%s", err, output.Bytes())
			}
			fmt.Fprintf(out, "built addon-proxy and examples/dashboard in %v\n", time.Since(start).Round(100*time.Millisecond))
			return nil
		case <-tick.C:
			fmt.Fprintf(out, "still building addon-proxy and examples/dashboard, %v ...\n", time.Since(start).Round(time.Second))
		}
	}
}

// register makes the cluster's objects of the walk-through: the
// namespace, the ExternalName Service of localhost on addon-proxy's
// port, the APIService with caBundle ca, and the RBAC a person needs.
func register(ctx context.Context, c *testcluster.Cluster, port int, ca []byte) error {
	cs, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.Admin)
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dashNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", dashNamespace, err)
	}
	if _, err := cs.CoreV1().Services(dashNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: dashService},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Service %s/%s: %w", dashNamespace, dashService, err)
	}
	// alice needs the role to use the dashboard; the kubeconfig's user is
	// in system:masters (testcluster's issuer says so of every token),
	// which RBAC allows everything, and is bound for the guide to point at.
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: dashRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{dashGroup}, Resources: []string{"notes"}, Verbs: []string{"list", "watch", "create"}},
			{APIGroups: []string{dashGroup}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ClusterRole %s: %w", dashRole, err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: dashRole + "s"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: dashRole},
		Subjects: []rbacv1.Subject{
			{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: person},
			{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: testcluster.User},
		},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ClusterRoleBinding %ss: %w", dashRole, err)
	}
	if _, err := dyn.Resource(apiServices).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": dashVersion + "." + dashGroup},
		"spec": map[string]any{
			"group": dashGroup, "version": dashVersion, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service":  map[string]any{"namespace": dashNamespace, "name": dashService, "port": int64(port)},
			"caBundle": base64.StdEncoding.EncodeToString(ca),
		},
	}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating APIService %s.%s: %w", dashVersion, dashGroup, err)
	}
	return nil
}

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// waitAvailable waits for the APIService's condition Available to be
// True, for availableWithin at most; past it, the error gives the
// condition's reason and message.
func waitAvailable(ctx context.Context, c *testcluster.Cluster) error {
	dyn, err := dynamic.NewForConfig(c.Admin)
	if err != nil {
		return err
	}
	name := dashVersion + "." + dashGroup
	deadline := time.Now().Add(availableWithin)
	last := "it has no condition Available yet"
	for {
		got, err := dyn.Resource(apiServices).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] != "Available" {
					continue
				}
				if m["status"] == "True" {
					return nil
				}
				last = fmt.Sprintf("its condition Available is %v (%v): %v", m["status"], m["reason"], m["message"])
			}
		case apierrors.IsNotFound(err):
			return fmt.Errorf("the APIService %s is gone", name)
		default:
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the APIService %s is not Available after %v: %s", name, availableWithin, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// kubectlPath is the kubectl to run kubectl proxy with: the user's, on
// PATH, or else the one hack/envtest.sh builds beside the API server.
func kubectlPath() (string, error) {
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p, nil
	}
	p := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no kubectl on PATH, nor in KUBEBUILDER_ASSETS: run bash hack/envtest.sh, which builds one there (%w)", err)
	}
	return p, nil
}

// signedIn is the page's line that names the user.
var signedIn = regexp.MustCompile(`signed in as <strong id="user">([^<]*)</strong>`)

// checkPage gets the page through kubectl proxy, as the browser will, and
// tells whether it names the person.
func checkPage(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	m := signedIn.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil || string(m[1]) != person {
		return fmt.Errorf("GET %s: %s, not the page signed in as %s:\n%s", url, resp.Status, person, bytes.TrimSpace(body))
	}
	return nil
}

// freeAddr is an address of 127.0.0.1 with a port free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// prefixWriter writes a process's output to out a line at a time, each
// after prefix, and gives each line to onLine if set. Its Write is for one
// goroutine at a time (exec's copy of the process's output), flush for
// after the last.
type prefixWriter struct {
	out    io.Writer
	prefix string
	onLine func(string)
	buf    []byte // a line not yet ended
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.line(string(p.buf[:i]))
		p.buf = p.buf[i+1:]
	}
}

func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.line(string(p.buf))
		p.buf = nil
	}
}

func (p *prefixWriter) line(s string) {
	fmt.Fprintf(p.out, "%s%s\n", p.prefix, s)
	if p.onLine != nil {
		p.onLine(s)
	}
}

// lockedWriter is w for writers on several goroutines: the program's own
// lines and its processes'.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
