package side

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// execEvery is how often the workload opens an exec stream.
const execEvery = 10 * time.Second

// noHost is what the API server answers an authenticated, authorized exec
// on a Pod that no node runs: the exec stream's success.
const noHost = "does not have a host assigned"

// errExecRan is an exec that the API server did not answer with noHost.
var errExecRan = errors.New("soak: the exec stream ended without the API server's answer that the Pod has no host")

// execLoop opens an exec stream on the side's Pod every execEvery until
// ctx ends, as kubectl does: WebSocket, falling back to SPDY.
func (w *workload) execLoop(ctx context.Context, cfg *rest.Config, pod string) {
	t := time.NewTicker(execEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := execOnce(ctx, cfg, w.ns, pod); err != nil {
			w.rec.fail(compExec, "", "", err)
			continue
		}
		w.rec.succeed(compExec)
	}
}

// execOnce opens one stream, and says nil when the API server answered
// that the Pod has no host.
func execOnce(ctx context.Context, cfg *rest.Config, ns, pod string) error {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return err
	}
	u.Path = path.Join(u.Path, "/api/v1/namespaces", ns, "pods", pod, "exec")
	q, err := scheme.ParameterCodec.EncodeParameters(&corev1.PodExecOptions{Command: []string{"true"}, Stdout: true}, corev1.SchemeGroupVersion)
	if err != nil {
		return err
	}
	u.RawQuery = q.Encode()
	spdy, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	if err != nil {
		return err
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err = exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdout: io.Discard})
	switch {
	case err == nil:
		return errExecRan
	case strings.Contains(err.Error(), noHost):
		// No type says it: the answer is a 400 whose message tells.
		return nil
	}
	return err
}
