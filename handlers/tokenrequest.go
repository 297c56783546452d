package handlers

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/authvault/authvault/login"
)

// TokenRequestConfig names a ServiceAccount and the token to mint for it.
type TokenRequestConfig struct {
	// Client mints the token: typically kubernetes.NewForConfig(cfg).CoreV1()
	// for a config from another vault, or from this vault's bootstrap
	// credential. It needs create on serviceaccounts/token.
	Client corev1client.ServiceAccountsGetter
	// Namespace and Name are the ServiceAccount's.
	Namespace, Name string
	// Audiences of the token. Default: the API server's.
	Audiences []string
	// ExpirationSeconds is the token's requested lifetime. Default: the API
	// server's (an hour); the server may shorten it.
	ExpirationSeconds int64
	// BoundObject ties the token to a Pod, Secret or Node: it stops working
	// when that object is deleted.
	BoundObject *authenticationv1.BoundObjectReference
	// Cluster gives every credential its server and TLS settings.
	Cluster login.ConnectionInfo
}

// TokenRequest returns a handler that mints a token for a ServiceAccount
// through the TokenRequest API. The token's expirationTimestamp becomes the
// credential's Expiration, so the vault mints the next one in the background
// before it expires: an operator acts as a tenant's ServiceAccount with
// short-lived tokens.
//
// The handler is named "token request <namespace>/<name>"; its metric label
// is "token request".
func TokenRequest(cfg TokenRequestConfig) login.Handler {
	return login.Named("token request "+cfg.Namespace+"/"+cfg.Name, "token request", func(ctx context.Context) (*login.ConnectionInfo, error) {
		if cfg.Client == nil || cfg.Namespace == "" || cfg.Name == "" {
			return nil, login.Permanent(errors.New("handlers: TokenRequest needs a Client, a Namespace and a Name"))
		}
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences:         cfg.Audiences,
			BoundObjectRef:    cfg.BoundObject,
			ExpirationSeconds: nonZero(cfg.ExpirationSeconds),
		}}
		resp, err := cfg.Client.ServiceAccounts(cfg.Namespace).CreateToken(ctx, cfg.Name, req, metav1.CreateOptions{})
		switch {
		// A missing ServiceAccount or permission is not mended by a retry
		// within the login: the callers get the error now, and the vault's
		// backoff spaces the next logins.
		case apierrors.IsNotFound(err):
			return nil, login.Permanent(fmt.Errorf("handlers: TokenRequest for serviceaccount %s/%s: the ServiceAccount does not exist: %w", cfg.Namespace, cfg.Name, err))
		case apierrors.IsForbidden(err):
			return nil, login.Permanent(fmt.Errorf("handlers: TokenRequest for serviceaccount %s/%s: this identity may not create serviceaccounts/token in namespace %s (RBAC, or see the server's answer): %w", cfg.Namespace, cfg.Name, cfg.Namespace, err))
		case err != nil:
			return nil, fmt.Errorf("handlers: TokenRequest for serviceaccount %s/%s: %w", cfg.Namespace, cfg.Name, err)
		}
		if resp.Status.Token == "" {
			return nil, fmt.Errorf("handlers: TokenRequest for serviceaccount %s/%s returned no token", cfg.Namespace, cfg.Name)
		}
		info := clusterPart(cfg.Cluster)
		info.Token = resp.Status.Token
		info.Expiration = resp.Status.ExpirationTimestamp.Time
		return &info, nil
	})
}

func nonZero(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}
