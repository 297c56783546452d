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
}

// streamers are every client-go way to exec, attach and port-forward.
var streamers = []streamer{
	{"exec over SPDY", execVia("exec", spdyExecutor)},
	{"exec over WebSocket", execVia("exec", webSocketExecutor)},
	{"exec, WebSocket falling back to SPDY", execVia("exec", fallbackExecutor)},
	{"attach over SPDY", execVia("attach", spdyExecutor)},
	{"attach over WebSocket", execVia("attach", webSocketExecutor)},
	{"attach, WebSocket falling back to SPDY", execVia("attach", fallbackExecutor)},
	{"port-forward over SPDY", forwardVia(spdyDialer)},
	{"port-forward, SPDY over WebSocket", forwardVia(tunnelingDialer)},
	{"port-forward, WebSocket falling back to SPDY", forwardVia(fallbackDialer)},
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
		yes := streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
		if yes {
			fellBack.Store(true)
		}
		return yes
	}
}

type dialerFor func(cfg *rest.Config, u *url.URL) httpstream.Dialer

func forwardVia(newDialer dialerFor) func(context.Context, *rest.Config, podRef) error {
	return func(ctx context.Context, cfg *rest.Config, pod podRef) error {
		stop := make(chan struct{})
		fw, err := portforward.NewOnAddresses(newDialer(cfg, streamURL(cfg, pod, "portforward", nil)),
			[]string{"127.0.0.1"}, []string{"0:80"}, stop, nil, io.Discard, io.Discard)
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

func spdyDialer(cfg *rest.Config, u *url.URL) httpstream.Dialer {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	return spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
}

func tunnelingDialer(cfg *rest.Config, u *url.URL) httpstream.Dialer {
	dialer, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	Expect(err).NotTo(HaveOccurred())
	return dialer
}

func fallbackDialer(cfg *rest.Config, u *url.URL) httpstream.Dialer {
	return portforward.NewFallbackDialer(tunnelingDialer(cfg, u), spdyDialer(cfg, u), mustFallBack())
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
