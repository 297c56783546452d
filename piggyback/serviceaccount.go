package piggyback

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// ServiceAccountRoot is where Kubernetes mounts a pod's ServiceAccount token,
// CA and namespace.
const ServiceAccountRoot = "/var/run/secrets/kubernetes.io/serviceaccount"

// serviceAccountRoot is the root the ServiceAccount handler reads; tests
// move it.
var serviceAccountRoot = ServiceAccountRoot

// ServiceAccount logs in as the pod's ServiceAccount, as client-go's
// rest.InClusterConfig does: the server from KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, the token, ca.crt and namespace files under
// ServiceAccountRoot (POD_NAMESPACE overrides the namespace file). Outside a
// cluster, or without a mounted token, it returns (nil, nil).
//
// The token file is reread like handlers.TokenFile's: at its JWT exp and at
// least once a minute, so tokens the kubelet rotates are picked up before
// the server sees the old one expire.
//
// The handler is named "service account"; its metric label is the same.
func ServiceAccount(ctx context.Context) (*login.ConnectionInfo, error) {
	return ServiceAccountIn(serviceAccountRoot)(ctx)
}

// ServiceAccountIn is ServiceAccount reading its files under root. It is
// named "service account <root>".
func ServiceAccountIn(root string) login.Handler {
	return login.Named("service account "+root, "service account", func(ctx context.Context) (*login.ConnectionInfo, error) {
		return orNil(serviceAccountIn(ctx, root))
	})
}

// serviceAccountIn is ServiceAccountIn's login, whose nothing says what is
// missing (see Defaults).
func serviceAccountIn(ctx context.Context, root string) (*login.ConnectionInfo, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, nothing("no in-cluster service account") // not in a cluster
	}
	tokenPath := filepath.Join(root, "token")
	if _, err := os.Stat(tokenPath); errors.Is(err, fs.ErrNotExist) {
		// automountServiceAccountToken: false
		return nil, nothing("no in-cluster service account token (" + tokenPath + ")")
	}
	base := login.ConnectionInfo{
		// JoinHostPort brackets an IPv6 host.
		Server:           "https://" + net.JoinHostPort(host, port),
		DefaultNamespace: namespace(root),
	}
	// Without its CA the server is verified against the system's roots,
	// as client-go does.
	if ca := filepath.Join(root, "ca.crt"); fileExists(ca) {
		base.CAPath = ca
	}
	return redacted(handlers.TokenFile(tokenPath, base)(ctx))
}

// namespace is POD_NAMESPACE, else the namespace file, else "".
func namespace(root string) string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	data, err := os.ReadFile(filepath.Join(root, "namespace"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir()
}
