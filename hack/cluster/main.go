// Command cluster runs a Kubernetes API server to try authvault on, for
// whoever has no cluster at hand: the kube-apiserver and etcd the tests use
// (envtest, binaries from hack/envtest.sh), whose bearer tokens come from a
// token issuer of its own that can revoke them. `make cluster` builds and
// starts it:
//
//	make cluster                 # writes bin/cluster/kubeconfig, stays up until Ctrl-C
//	go run ./examples/quickstart --kubeconfig bin/cluster/kubeconfig
//	make cluster-revoke          # in another terminal: the token is revoked, a new one written
//
// The kubeconfig's user reads its token from the file beside it (tokenFile),
// which holds one token at a time, valid until it is revoked or the cluster
// stops: SIGUSR1 (what make cluster-revoke sends) writes a new token there
// and revokes the old one, which the API server then refuses within 10 s
// (how long it trusts its last review of a token). A vault on the
// kubeconfig meets the 401, logs in again, reads the file and goes on; a
// client that keeps the old token gets 401 from then on.
//
// The token's user is in system:masters. Everything lives on loopback and in
// temporary directories; SIGINT, SIGTERM or SIGHUP stop the API server and
// etcd and remove what the program wrote. It prints no token.
//
// # The browser walk-through
//
// With --dashboard (`make dashboard`) the cluster also serves a person in a
// browser: the program builds addon-proxy and examples/dashboard, runs them
// on loopback with the dashboard as the APIService v1.dashboard.authvault.dev
// (addon-proxy --apiservice, on an ExternalName Service of localhost), and
// runs kubectl proxy on 127.0.0.1:8001 (--proxy-port) with the kubeconfig;
// then it prints the page's URL. The signals stop these processes first,
// then the cluster (dashboard.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/authvault/authvault/testkit/testcluster"
)

func main() {
	var opts options
	flag.StringVar(&opts.dir, "dir", "bin/cluster", "the directory to write the kubeconfig, its token and the pid file in")
	flag.BoolVar(&opts.dashboard, "dashboard", false, "also run the browser walk-through (make dashboard): addon-proxy and examples/dashboard as an APIService, behind kubectl proxy")
	flag.IntVar(&opts.proxyPort, "proxy-port", 8001, "with --dashboard: the port of kubectl proxy on 127.0.0.1 (DASHBOARD_PROXY_PORT)")
	flag.BoolVar(&opts.member, "member", false, "also start a member cluster that trusts the hub's ServiceAccount tokens (make cluster-pair; docs/federation.md)")
	flag.Parse()
	// envtest's own lines are for its developers.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	// Before anything else: a signal that comes early must not kill the
	// process with the API server and etcd running.
	revoke := make(chan os.Signal, 1)
	signal.Notify(revoke, syscall.SIGUSR1)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := run(ctx, opts, revoke, os.Stdout)
	stop()
	if err != nil {
		name := "cluster"
		if opts.dashboard {
			name = "dashboard"
		}
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// options are the program's flags.
type options struct {
	dir       string // the kubeconfig's, the token's and the pid file's
	dashboard bool   // also the browser walk-through
	proxyPort int    // kubectl proxy's, with dashboard
	member    bool   // also a member that trusts the hub's tokens
}

// run starts the cluster, writes the files into opts.dir, starts the
// walk-through with opts.dashboard, and serves revocations until ctx ends.
func run(ctx context.Context, opts options, revoke <-chan os.Signal, out io.Writer) (err error) {
	dir := opts.dir
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	// Before anything: the files are replaced, then removed at the end.
	if err := checkDir(abs); err != nil {
		return err
	}
	// The directories this run makes go at the end too (bin/cluster after
	// make cluster), so that a Ctrl-C leaves nothing behind.
	made := missingDirs(abs)
	target := "cluster"
	if opts.dashboard {
		target = "dashboard"
		// Before the minutes of a first build: the port is kubectl proxy's.
		if err := checkProxyPort(opts.proxyPort); err != nil {
			return err
		}
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set: start it with make %s, which builds the API server first", target)
	}
	// The walk-through's processes write their lines here too.
	out = &lockedWriter{w: out}
	fmt.Fprintln(out, "starting kube-apiserver and etcd (a few seconds) ...")
	c, err := testcluster.StartWith(testcluster.Options{IssuerDiscovery: opts.member})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Stop()) }()

	defer func() {
		for _, f := range files {
			if rmErr := os.Remove(filepath.Join(abs, f)); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
				err = errors.Join(err, rmErr)
			}
		}
		err = errors.Join(err, removeMade(made))
	}()
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return err
	}
	token := c.Issuer.Issue(0)
	if err := writeFile(abs, "token", []byte(token+"\n")); err != nil {
		return err
	}
	if err := writeFile(abs, "pid", []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		return err
	}
	// The kubeconfig last: its presence says the cluster is ready.
	if err := writeKubeconfig(abs, c.Server, c.CAData); err != nil {
		return err
	}

	kubeconfig := filepath.Join(dir, "kubeconfig")
	var exited <-chan *proc // a walk-through's process that ended before its stop
	if opts.member {
		fmt.Fprintln(out, "starting the member's kube-apiserver and etcd ...")
		startCtx, cancel := context.WithTimeout(ctx, memberStart)
		m, err := startMember(startCtx, c, abs)
		cancel()
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, m.Stop()) }()
		printPair(out, c, m, dir, kubeconfig)
	}
	if opts.dashboard {
		var w *walkThrough
		w, err = startWalkThrough(ctx, c, kubeconfig, opts.proxyPort, out)
		if w != nil {
			defer func() { err = errors.Join(err, w.stop()) }()
		}
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(out, "stopping")
				return nil // Ctrl-C while it started
			}
			return err
		}
		exited = w.exited
		w.printGuide(out)
	} else if !opts.member {
		printQuickstart(out, c, dir, kubeconfig)
	}

	for revoked := 1; ; revoked++ {
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "stopping: %d token reviews answered, %d refused\n", c.Issuer.Reviews(), c.Issuer.Rejected())
			return nil
		case p := <-exited:
			return fmt.Errorf("%s exited (%v): the walk-through cannot go on without it; its lines above say why", p.name, p.err)
		case <-revoke:
			// The new token first: whoever meets the old one's 401 finds
			// the new one in the file.
			next := c.Issuer.Issue(0)
			if err := writeFile(abs, "token", []byte(next+"\n")); err != nil {
				return err
			}
			c.Issuer.Revoke(token)
			token = next
			fmt.Fprintf(out, "revoked the token (%d so far); a new one is in the token file\n", revoked)
		}
	}
}

// printQuickstart says what the cluster is and how to try authvault on it.
func printQuickstart(out io.Writer, c *testcluster.Cluster, dir, kubeconfig string) {
	fmt.Fprintf(out, `
kube-apiserver is up at %s, with a token issuer of its own (user %s,
in system:masters). The kubeconfig is %s, its token in %s.

Run the quickstart against it, in another terminal:

    go run ./examples/quickstart --kubeconfig %s

or kubectl --kubeconfig %s get namespaces.

Revoke the token (a new one goes into the token file; the API server
refuses the old one within %v, and a vault logs in again and goes on):

    make cluster-revoke

Ctrl-C stops the cluster.
`, strings.TrimSuffix(c.Server, "/"), testcluster.User, kubeconfig, filepath.Join(dir, "token"), kubeconfig, kubeconfig, testcluster.ReviewCacheTTL)
}

// files are what the program writes in its directory, and removes when it
// stops.
var files = []string{"kubeconfig", "token", "pid", "member-server", "member-ca.crt"}

// missingDirs are dir and those of its parents that do not exist, dir
// first: what os.MkdirAll(dir) makes.
func missingDirs(dir string) []string {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			return missing
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			return missing
		}
	}
}

// removeMade removes the directories made, dir first, unless one holds
// something of someone else's now: that one and its parents stay.
func removeMade(made []string) error {
	for _, d := range made {
		// Only a directory: a file or link someone put in its place is
		// theirs (os.Remove would take it).
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			return nil
		}
		err := os.Remove(d)
		switch {
		case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST):
			return nil
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return err
		}
	}
	return nil
}

// checkDir tells whether the program may write its files in dir, replace
// them and remove them when it stops: none is there, or they are those of
// a run that has ended without removing them (its pid file names no
// process). Files of the user's (a --dir of ~/.kube) or of a cluster
// running there are left alone.
func checkDir(dir string) error {
	pidFile := filepath.Join(dir, "pid")
	b, err := os.ReadFile(pidFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		for _, f := range files {
			if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
				return fmt.Errorf("%s is there, and not from a run of this program (no pid file beside it): it would be replaced, then removed; move it, or give another --dir (CLUSTER_DIR)", filepath.Join(dir, f))
			}
		}
		return nil
	case err != nil:
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("%s is there, and holds no pid of this program's: it would be replaced, then removed; move it, or give another --dir (CLUSTER_DIR)", pidFile)
	}
	if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("a cluster already runs with the files in %s (pid %d): stop it (Ctrl-C), or give another --dir (CLUSTER_DIR)", dir, pid)
	}
	return nil // an ended run's files: replaced
}

// writeKubeconfig writes dir/kubeconfig: the cluster with its CA, and a
// user whose token is dir/token, in the namespace default.
func writeKubeconfig(dir, server string, ca []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["authvault"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[testcluster.User] = &clientcmdapi.AuthInfo{TokenFile: filepath.Join(dir, "token")}
	cfg.Contexts["authvault"] = &clientcmdapi.Context{Cluster: "authvault", AuthInfo: testcluster.User, Namespace: "default"}
	cfg.CurrentContext = "authvault"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFile(dir, "kubeconfig", data)
}

// writeFile replaces dir/name with data at once, by a rename: a reader sees
// the old content or the new, never a part.
func writeFile(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // gone after the rename, there after a failure
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}
