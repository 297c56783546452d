package addonauth

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// FrontProxy trusts the API server's aggregation layer: a request whose
// TLS client certificate verifies against the requestheader client CA,
// with a common name among the allowed names when they are not empty,
// carries the caller the API server authenticated, in the requestheader
// headers (X-Remote-User, X-Remote-Uid, X-Remote-Group, X-Remote-Extra-*).
// It is how the API server forwards a person behind kubectl proxy to an
// APIService's backend. The server must ask for client certificates
// without verifying them (tls.Config.ClientAuth tls.RequestClientCert):
// the middleware verifies them, so a caller with another certificate, or
// none, is still served as a bearer caller on the same listener. A server
// that verifies them itself against other CAs (VerifyClientCertIfGiven
// with its own ClientCAs) refuses the API server's in the handshake.
//
// With no ClientCAFile, everything comes from the ConfigMap the API server
// publishes, kube-system/extension-apiserver-authentication, read through
// Options.Config and followed while Authenticator.Start runs: a rotated CA
// is trusted, and one removed from it refused, without a restart. Reading
// it needs the Role extension-apiserver-authentication-reader in
// kube-system. While the ConfigMap is missing or malformed, or cannot be
// read before any version has been (later, the last version read stays in
// force through an outage), callers with a client certificate and no
// bearer token get 503, and the reason is logged: never trusted on a
// guess. Without Start, the
// ConfigMap is never read and they get 503 for good (with ClientCAFile,
// the CA New read is used, never reread).
type FrontProxy struct {
	// ClientCAFile is a PEM bundle of the requestheader client CA, as
	// kube-apiserver's --requestheader-client-ca-file, reread when it
	// changes while Start runs. With it, the names below are used and the
	// ConfigMap is not read. Default: the ConfigMap.
	ClientCAFile string
	// AllowedNames are the common names a front proxy's certificate may
	// have (--requestheader-allowed-names). Empty: any certificate of the
	// CA. Only with ClientCAFile.
	AllowedNames []string
	// UsernameHeaders, UIDHeaders, GroupHeaders and ExtraHeaderPrefixes
	// name the headers the identity is read from, as kube-apiserver's
	// --requestheader-* flags. Only with ClientCAFile. Defaults:
	// X-Remote-User, none, X-Remote-Group and X-Remote-Extra- (no UID
	// header by default, as k8s.io/apiserver's delegated authentication:
	// a proxy that does not set one must not be trusted for it).
	UsernameHeaders, UIDHeaders, GroupHeaders, ExtraHeaderPrefixes []string
}

// The ConfigMap the API server publishes its requestheader settings in,
// and its keys.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
	keyClientCA            = "requestheader-client-ca-file"
	keyAllowedNames        = "requestheader-allowed-names"
	keyUsernameHeaders     = "requestheader-username-headers"
	keyUIDHeaders          = "requestheader-uid-headers"
	keyGroupHeaders        = "requestheader-group-headers"
	keyExtraPrefixes       = "requestheader-extra-headers-prefix"
)

// frontProxy authenticates the requests a front proxy sends, from the
// configuration it holds now.
type frontProxy struct {
	source  string // what the configuration comes from, for logs and errors
	current atomic.Pointer[frontProxyState]
	auth    authenticator.Request // k8s.io/apiserver's, reading current: the chain check, then headers
	chain   authenticator.Request // k8s.io/apiserver's chain and name check alone
	headers authenticator.Request // k8s.io/apiserver's header reader alone
	conns   verifiedConns         // the connections whose chain was checked
	now     func() time.Time      // for the chains' expiry; tests set it
	file    string                // the CA file; "" for the ConfigMap
	client  kubernetes.Interface  // for the ConfigMap; nil with a file
	log     logr.Logger
	started atomic.Bool // Start has run
	mu      sync.Mutex  // orders the sets
	known   atomic.Pointer[knownHeaders]
}

// frontProxyState is the configuration in force: either settings, or
// why there are none.
type frontProxyState struct {
	ca                             dynamiccertificates.CAContentProvider
	allowed, user, uid, group, ext []string
	err                            error // set: front-proxy callers get 503
	// unknown: no version of the ConfigMap is in force (not read yet,
	// unreadable, missing or deleted): a later list or a failed one may
	// say what is now true. A version read, good or malformed, stands
	// until the next.
	unknown bool
}

// errFrontProxyUnavailable is why a front proxy's caller gets 503.
var errFrontProxyUnavailable = errors.New("addonauth: the front proxy's configuration is not loaded")

func newFrontProxy(fp FrontProxy, client kubernetes.Interface, log logr.Logger) (*frontProxy, error) {
	f := &frontProxy{log: log, now: time.Now}
	f.known.Store(&knownHeaders{})
	if fp.ClientCAFile == "" {
		if len(fp.AllowedNames)+len(fp.UsernameHeaders)+len(fp.UIDHeaders)+len(fp.GroupHeaders)+len(fp.ExtraHeaderPrefixes) > 0 {
			return nil, errors.New("addonauth: FrontProxy's names and headers go with ClientCAFile: without it, the ConfigMap gives them")
		}
		f.source = "ConfigMap " + authConfigMapNamespace + "/" + authConfigMapName
		f.client = client
		f.current.Store(&frontProxyState{unknown: true, err: fmt.Errorf("%w: %s not read yet (Authenticator.Start reads and follows it)", errFrontProxyUnavailable, f.source)})
	} else {
		f.source = "requestheader client CA file " + fp.ClientCAFile
		f.file = fp.ClientCAFile
		// Read here, so that a bad file fails New; followed from Start
		// (the follower starts a goroutine when made, even if its file
		// does not load).
		ca, err := loadCAFile(fp.ClientCAFile)
		if err != nil {
			return nil, err
		}
		st := &frontProxyState{ca: ca, allowed: fp.AllowedNames, uid: fp.UIDHeaders,
			user: orDefault(fp.UsernameHeaders, "X-Remote-User"), group: orDefault(fp.GroupHeaders, "X-Remote-Group"),
			ext: orDefault(fp.ExtraHeaderPrefixes, "X-Remote-Extra-")}
		f.current.Store(st)
		f.remember(st)
	}
	state := func(pick func(*frontProxyState) []string) headerrequest.StringSliceProvider {
		return headerrequest.StringSliceProviderFunc(func() []string { return pick(f.current.Load()) })
	}
	// As headerrequest.NewDynamicVerifyOptionsSecure makes it, with the
	// header reader kept for the connections already checked.
	f.headers = headerrequest.NewDynamic(
		state(func(s *frontProxyState) []string { return s.user }),
		state(func(s *frontProxyState) []string { return s.uid }),
		state(func(s *frontProxyState) []string { return s.group }),
		state(func(s *frontProxyState) []string { return s.ext }))
	allowed := state(func(s *frontProxyState) []string { return s.allowed })
	f.auth = x509request.NewDynamicCAVerifier(f.verifyOptions, f.headers, allowed)
	f.chain = x509request.NewDynamicCAVerifier(f.verifyOptions, authenticator.RequestFunc(
		func(*http.Request) (*authenticator.Response, bool, error) {
			return &authenticator.Response{}, true, nil
		}), allowed)
	return f, nil
}

func orDefault(names []string, def string) []string {
	if len(names) == 0 {
		return []string{def}
	}
	return names
}

// verifyOptions are the current CA's; none while there is no CA, so that
// no certificate verifies.
func (f *frontProxy) verifyOptions() (x509.VerifyOptions, bool) {
	s := f.current.Load()
	if s.ca == nil {
		return x509.VerifyOptions{}, false
	}
	return s.ca.VerifyOptions()
}

// authenticate reads the caller a front proxy vouches for. ok is false
// when r is not a front proxy's: no client certificate, one the CA did
// not sign or with a name not allowed (err says which), or no user header.
// err wraps errFrontProxyUnavailable when the configuration is not loaded
// and r has a client certificate.
func (f *frontProxy) authenticate(r *http.Request) (User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return User{}, false, nil
	}
	s := f.current.Load()
	if s.err != nil {
		return User{}, false, s.err
	}
	// The generation before the check: were the CA to change meanwhile,
	// the connection is checked again at its next request.
	opts, _ := f.verifyOptions()
	gen := caGeneration{state: s, roots: opts.Roots}
	if !f.conns.verified(r.TLS, gen, f.now()) {
		if _, ok, err := f.chain.AuthenticateRequest(r); err != nil || !ok {
			return User{}, false, err
		}
		if opts.Roots != nil {
			f.conns.remember(r.TLS, gen, opts)
		}
	}
	resp, ok, err := f.headers.AuthenticateRequest(r)
	if err != nil || !ok {
		return User{}, false, err
	}
	info := resp.User
	u := User{Name: info.GetName(), UID: info.GetUID(), Groups: slices.Clone(info.GetGroups())}
	if extra := info.GetExtra(); len(extra) > 0 {
		u.Extra = make(map[string][]string, len(extra))
		for k, v := range extra {
			u.Extra[k] = slices.Clone(v)
		}
	}
	return u, true, nil
}

// isHeader tells whether name is one a front proxy's configuration has
// read the identity from since New (any spelling): a caller must not
// bring one, even while no configuration is in force.
func (f *frontProxy) isHeader(name string) bool {
	k := f.known.Load()
	for _, n := range k.names {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	for _, p := range k.prefixes {
		if hasPrefixFold(name, p) {
			return true
		}
	}
	return false
}

// knownHeaders are the header names and prefixes of every configuration
// in force since New.
type knownHeaders struct{ names, prefixes []string }

// remember adds s's header names to those isHeader refuses.
func (f *frontProxy) remember(s *frontProxyState) {
	if s.err != nil {
		return
	}
	k := *f.known.Load()
	for _, list := range [][]string{s.user, s.uid, s.group} {
		for _, n := range list {
			if !slices.ContainsFunc(k.names, func(m string) bool { return strings.EqualFold(m, n) }) {
				k.names = append(slices.Clip(k.names), strings.ReplaceAll(n, "_", "-"))
			}
		}
	}
	for _, p := range s.ext {
		if !slices.ContainsFunc(k.prefixes, func(m string) bool { return strings.EqualFold(m, p) }) {
			k.prefixes = append(slices.Clip(k.prefixes), strings.ReplaceAll(p, "_", "-"))
		}
	}
	f.known.Store(&k)
}

// run follows the configuration until ctx ends.
func (f *frontProxy) run(ctx context.Context) {
	if f.file == "" {
		f.followConfigMap(ctx)
		return
	}
	ca, err := dynamiccertificates.NewDynamicCAContentFromFile("requestheader-client-ca-file", f.file)
	if err != nil {
		// Changed since New read it: the CA New read stays in force.
		f.log.Error(err, "cannot follow the front proxy's CA file: keeping the CA read at start", "source", f.source)
		<-ctx.Done()
		return
	}
	s := *f.current.Load()
	s.ca = ca
	f.set(&s)
	ca.Run(ctx, 1)
}

// loadCAFile reads a CA bundle file, for an error that names it.
func loadCAFile(path string) (dynamiccertificates.CAContentProvider, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("addonauth: FrontProxy.ClientCAFile: %w", err)
	}
	ca, err := dynamiccertificates.NewStaticCAContent("requestheader-client-ca-file", pem)
	if err != nil {
		return nil, fmt.Errorf("addonauth: FrontProxy.ClientCAFile %s: %w", path, err)
	}
	return ca, nil
}

// followConfigMap watches the ConfigMap and takes each version of it.
func (f *frontProxy) followConfigMap(ctx context.Context) {
	// One ConfigMap, by name: what the Role extension-apiserver-authentication-reader
	// allows (a list or watch with its name as field selector).
	inf := informers.NewSharedInformerFactoryWithOptions(f.client, 0, informers.WithNamespace(authConfigMapNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", authConfigMapName).String()
		})).Core().V1().ConfigMaps().Informer()
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		// Only while no version has been read: later, the last version
		// read stays in force through an outage, as it does in the API
		// server's own aggregated servers.
		if errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return // a watch that ended, to be made again: no news
		}
		f.setIf(func(prev *frontProxyState) bool { return prev.unknown },
			&frontProxyState{unknown: true, err: fmt.Errorf("%w: %s cannot be read: %w", errFrontProxyUnavailable, f.source, err)})
	})
	take := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == authConfigMapName {
			f.set(f.parse(cm))
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    take,
		UpdateFunc: func(_, obj any) { take(obj) },
		DeleteFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name != authConfigMapName {
				return
			}
			// The cluster no longer publishes the CA: it is no longer
			// trusted.
			f.set(&frontProxyState{unknown: true, err: fmt.Errorf("%w: %s was deleted", errFrontProxyUnavailable, f.source)})
		},
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		// A list that finds nothing is a missing ConfigMap. Only a state
		// from before any version was read is replaced (a failed list's
		// too: the reason logged must be the one now true); an Add that
		// came since stands.
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return
		}
		if _, exists, _ := inf.GetStore().GetByKey(authConfigMapNamespace + "/" + authConfigMapName); !exists {
			f.setIf(func(prev *frontProxyState) bool { return prev.unknown },
				&frontProxyState{unknown: true, err: fmt.Errorf("%w: %s does not exist (kube-apiserver publishes it when run with --requestheader-client-ca-file)", errFrontProxyUnavailable, f.source)})
		}
	})
	inf.RunWithContext(ctx)
	wg.Wait()
}

// parse reads one version of the ConfigMap.
func (f *frontProxy) parse(cm *corev1.ConfigMap) *frontProxyState {
	bad := func(format string, args ...any) *frontProxyState {
		return &frontProxyState{err: fmt.Errorf("%w: %s: %s", errFrontProxyUnavailable, f.source, fmt.Sprintf(format, args...))}
	}
	pem, ok := cm.Data[keyClientCA]
	if !ok || strings.TrimSpace(pem) == "" {
		return bad("no %s (kube-apiserver runs without --requestheader-client-ca-file)", keyClientCA)
	}
	ca, err := dynamiccertificates.NewStaticCAContent(keyClientCA, []byte(pem))
	if err != nil {
		return bad("%s: %v", keyClientCA, err)
	}
	s := &frontProxyState{ca: ca}
	for key, list := range map[string]*[]string{keyAllowedNames: &s.allowed, keyUsernameHeaders: &s.user,
		keyUIDHeaders: &s.uid, keyGroupHeaders: &s.group, keyExtraPrefixes: &s.ext} {
		v, ok := cm.Data[key]
		if !ok || v == "" {
			continue
		}
		if err := json.Unmarshal([]byte(v), list); err != nil {
			return bad("%s is not a JSON list of strings: %v", key, err)
		}
	}
	if len(s.user) == 0 {
		return bad("%s names no header", keyUsernameHeaders)
	}
	return s
}

// set puts s in force, logging what changed.
func (f *frontProxy) set(s *frontProxyState) {
	f.setIf(func(*frontProxyState) bool { return true }, s)
}

// setIf puts s in force if the state in force is one replace accepts.
func (f *frontProxy) setIf(replace func(prev *frontProxyState) bool, s *frontProxyState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.current.Load()
	if !replace(prev) {
		return
	}
	f.remember(s)
	f.current.Store(s)
	switch {
	case s.err != nil && (prev.err == nil || prev.err.Error() != s.err.Error()):
		f.log.Error(s.err, "front-proxy callers get 503 until this is fixed", "source", f.source)
	case s.err == nil && prev.err != nil:
		f.log.Info("front-proxy configuration loaded", "source", f.source, "allowedNames", s.allowed, "usernameHeaders", s.user)
	case s.err == nil && !bytes.Equal(s.ca.CurrentCABundleContent(), prev.ca.CurrentCABundleContent()):
		f.log.Info("front-proxy CA changed: the new bundle is trusted, what it left out is not", "source", f.source)
	case s.err == nil && !slices.Equal(s.allowed, prev.allowed):
		f.log.Info("front-proxy allowed names changed", "source", f.source, "allowedNames", s.allowed)
	}
}
