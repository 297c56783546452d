//lint:file-ignore SA1019 apimachinery's httpstream, deprecated from v0.36, is what client-go's streams fail with before it.

package integration

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// noHost is what the API server answers an authenticated, authorized exec,
// attach or port-forward on a Pod that no node runs (envtest has no
// scheduler nor kubelet): a 400 sent before any upgrade.
const noHost = "does not have a host assigned"

// podRef names a Pod.
type podRef struct{ ns, name string }

// noHostPod creates a Pod with one container in a new namespace; it is
// never scheduled.
func noHostPod(ctx context.Context, prefix string) podRef {
	ns := newNamespace(prefix)
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "idle"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(pod.Spec.NodeName).To(BeEmpty())
	return podRef{ns: ns, name: pod.Name}
}

// streamer opens one stream of client-go's on a config and returns the
// error it ends with.
type streamer struct {
	name string
	run  func(ctx context.Context, cfg *rest.Config, pod podRef) error
	// upgrades is how many upgrade requests it sends when the API server
	// refuses the first: two when it falls back from WebSocket to SPDY.
	upgrades int
}

// streamers are every client-go way to exec, attach and port-forward.
var streamers = []streamer{
	{"exec over SPDY", execVia("exec", spdyExecutor), 1},
	{"exec over WebSocket", execVia("exec", webSocketExecutor), 1},
	{"exec, WebSocket falling back to SPDY", execVia("exec", fallbackExecutor), 2},
	{"attach over SPDY", execVia("attach", spdyExecutor), 1},
	{"attach over WebSocket", execVia("attach", webSocketExecutor), 1},
	{"attach, WebSocket falling back to SPDY", execVia("attach", fallbackExecutor), 2},
	{"port-forward over SPDY", forwardVia(spdyForwarder), 1},
	{"port-forward, SPDY over WebSocket", forwardVia(tunnelingForwarder), 1},
	{"port-forward, WebSocket falling back to SPDY", forwardVia(fallbackForwarder), 2},
}

// streamURL is the URL of pod's subresource sub with opts.
func streamURL(cfg *rest.Config, pod podRef, sub string, opts runtime.Object) *url.URL {
	u, err := url.Parse(cfg.Host)
	Expect(err).NotTo(HaveOccurred())
	u.Path = path.Join(u.Path, "/api/v1/namespaces", pod.ns, "pods", pod.name, sub)
	if opts != nil {
		q, err := scheme.ParameterCodec.EncodeParameters(opts, corev1.SchemeGroupVersion)
		Expect(err).NotTo(HaveOccurred())
		u.RawQuery = q.Encode()
	}
	return u
}

type executorFor func(cfg *rest.Config, u *url.URL) remotecommand.Executor

func execVia(sub string, newExecutor executorFor) func(context.Context, *rest.Config, podRef) error {
	return func(ctx context.Context, cfg *rest.Config, pod podRef) error {
		var opts runtime.Object = &corev1.PodAttachOptions{Container: "c", Stdout: true}
		if sub == "exec" {
			opts = &corev1.PodExecOptions{Container: "c", Command: []string{"true"}, Stdout: true}
		}
		exec := newExecutor(cfg, streamURL(cfg, pod, sub, opts))
		return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
	}
}

func spdyExecutor(cfg *rest.Config, u *url.URL) remotecommand.Executor {
	exec, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	Expect(err).NotTo(HaveOccurred())
	return exec
}

func webSocketExecutor(cfg *rest.Config, u *url.URL) remotecommand.Executor {
	exec, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
	Expect(err).NotTo(HaveOccurred())
	return exec
}

func fallbackExecutor(cfg *rest.Config, u *url.URL) remotecommand.Executor {
	exec, err := remotecommand.NewFallbackExecutor(webSocketExecutor(cfg, u), spdyExecutor(cfg, u), mustFallBack())
	Expect(err).NotTo(HaveOccurred())
	return exec
}

// mustFallBack is kubectl's test for falling back from WebSocket to SPDY;
// the spec fails unless it was asked, and said yes: the pod has no host
// whatever the protocol, so both were tried.
func mustFallBack() func(error) bool {
	var fellBack atomic.Bool
	DeferCleanup(func() {
		Expect(fellBack.Load()).To(BeTrue(), "the WebSocket upgrade failed as an upgrade, and SPDY was tried")
	})
	return func(err error) bool {
		// k8s.io/streaming's error from client-go v0.36, apimachinery's
		// before, as kubectl of each release checks.
		yes := streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err) ||
			httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		if yes {
			fellBack.Store(true)
		}
		return yes
	}
}

// forwarderFor makes a port-forwarder of one kind to the portforward URL u,
// listening on loopback.
type forwarderFor func(cfg *rest.Config, u *url.URL, stop chan struct{}) (*portforward.PortForwarder, error)

var forwardAddresses, forwardPorts = []string{"127.0.0.1"}, []string{"0:80"}

func forwardVia(newForwarder forwarderFor) func(context.Context, *rest.Config, podRef) error {
	return func(ctx context.Context, cfg *rest.Config, pod podRef) error {
		stop := make(chan struct{})
		fw, err := newForwarder(cfg, streamURL(cfg, pod, "portforward", nil), stop)
		Expect(err).NotTo(HaveOccurred())
		done := make(chan error, 1)
		go func() { done <- fw.ForwardPorts() }()
		select {
		case err := <-done:
			close(stop)
			return err
		case <-time.After(time.Minute):
			// Forwarding: it dialed, which a pod without a host cannot.
			close(stop)
			<-done
			return errors.New("the port-forward dialed and forwarded")
		case <-ctx.Done():
			close(stop)
			<-done
			return ctx.Err()
		}
	}
}

// spdyForwarder: spdy.RoundTripperFor and spdy.NewDialer.
func spdyForwarder(cfg *rest.Config, u *url.URL, stop chan struct{}) (*portforward.PortForwarder, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	return portforward.NewOnAddresses(dialer, forwardAddresses, forwardPorts, stop, nil, io.Discard, io.Discard)
}

// tunnelingForwarder: portforward.NewSPDYOverWebsocketDialer.
func tunnelingForwarder(cfg *rest.Config, u *url.URL, stop chan struct{}) (*portforward.PortForwarder, error) {
	dialer, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	Expect(err).NotTo(HaveOccurred())
	return portforward.NewOnAddresses(dialer, forwardAddresses, forwardPorts, stop, nil, io.Discard, io.Discard)
}

// fallbackForwarder: portforward.NewFallbackDialer, from the WebSocket
// tunnel to SPDY, as kubectl does.
func fallbackForwarder(cfg *rest.Config, u *url.URL, stop chan struct{}) (*portforward.PortForwarder, error) {
	tunneling, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	Expect(err).NotTo(HaveOccurred())
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	dialer := portforward.NewFallbackDialer(tunneling, spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u), mustFallBack())
	return portforward.NewOnAddresses(dialer, forwardAddresses, forwardPorts, stop, nil, io.Discard, io.Discard)
}

// expectAnswer checks that err is the API server's answer want (noHost, or
// a Forbidden naming a user): neither a TLS failure nor a 401.
func expectAnswer(err error, want string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred())
	Expect(err.Error()).NotTo(ContainSubstring("x509"))
	Expect(err.Error()).NotTo(ContainSubstring("nauthorized"))
	Expect(apierrors.IsUnauthorized(err)).To(BeFalse())
	Expect(err.Error()).To(ContainSubstring(want))
}
