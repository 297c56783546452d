package handlers

import (
	"context"

	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"

	"github.com/authvault/authvault/login"
)

// execResponse is spec.response of KUBERNETES_EXEC_INFO with
// ProvideResponse: the response that rejected the plugin's previous
// credential. Its shape is the ExecInfo Response of client-go's exec plugin
// proposal (kubernetes/community,
// contributors/design-proposals/auth/kubectl-exec-plugins.md): the HTTP
// status code and response headers, of which only WWW-Authenticate is sent.
type execResponse struct {
	Code   int32               `json:"code"`
	Header map[string][]string `json:"header,omitempty"`
}

// specV1 and specV1beta1 are the spec of KUBERNETES_EXEC_INFO: the
// version's own, and the response when there is one to tell.
type (
	specV1 struct {
		clientauthv1.ExecCredentialSpec
		Response *execResponse `json:"response,omitempty"`
	}
	specV1beta1 struct {
		clientauthv1beta1.ExecCredentialSpec
		Response *execResponse `json:"response,omitempty"`
	}
)

// response is what the plugin is told of the response that made the vault
// run it: nil unless ProvideResponse is set and ctx says the login follows
// a rejection whose status code is known.
func (cfg *ExecConfig) response(ctx context.Context) *execResponse {
	if !cfg.ProvideResponse {
		return nil
	}
	r, ok := login.ReasonFrom(ctx)
	if !ok || r.Kind != login.Rejected || r.StatusCode == 0 {
		return nil
	}
	resp := &execResponse{Code: int32(r.StatusCode)}
	if r.Challenge != "" && len(r.Challenge) <= maxChallenge {
		resp.Header = map[string][]string{"WWW-Authenticate": {r.Challenge}}
	}
	return resp
}

// maxChallenge bounds the WWW-Authenticate header passed to a plugin: the
// server (or a proxy) writes it, and one environment string may not pass
// 128 KiB on Linux, or the plugin cannot be started at all. A longer one is
// left out rather than cut, which could change its meaning.
const maxChallenge = 4 << 10
