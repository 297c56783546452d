package piggyback

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/testkit/testpki"
)

// mountServiceAccount writes what the kubelet mounts into a pod and sets
// the service's environment.
func mountServiceAccount(t *testing.T, host string, withCA bool) (root string, signer *testpki.Signer) {
	t.Helper()
	root = t.TempDir()
	signer = testpki.NewSigner(t)
	writeFile(t, filepath.Join(root, "token"), signer.JWT(t, map[string]any{
		"sub": "system:serviceaccount:ops:operator", "exp": time.Now().Add(time.Hour).Unix(),
	}))
	writeFile(t, filepath.Join(root, "namespace"), "ops\n")
	if withCA {
		writeFile(t, filepath.Join(root, "ca.crt"), string(testpki.NewCA(t).PEM))
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	serviceAccountRoot = root
	return root, signer
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestServiceAccount(t *testing.T) {
	tests := []struct {
		name, host, wantServer string
		withCA                 bool
	}{
		{"ipv4 with CA", "10.96.0.1", "https://10.96.0.1:443", true},
		{"ipv6 bracketed", "fd00::1", "https://[fd00::1]:443", true},
		{"missing CA: system roots", "10.96.0.1", "https://10.96.0.1:443", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			root, _ := mountServiceAccount(t, tt.host, tt.withCA)
			info, err := ServiceAccount(context.Background())
			if err != nil || info == nil {
				t.Fatalf("ServiceAccount() = %v, %v", info, err)
			}
			wantCA := ""
			if tt.withCA {
				wantCA = filepath.Join(root, "ca.crt")
			}
			if info.Server != tt.wantServer || info.CAPath != wantCA || info.DefaultNamespace != "ops" || info.Token == "" {
				t.Errorf("credential = %v, want server %s, CA %q, namespace ops and the token", info, tt.wantServer, wantCA)
			}
			if info.RefreshAfter != handlers.RereadAfter || info.Expiration.IsZero() {
				t.Errorf("credential read again after %v, expiring %v; want %v and the JWT's exp: the token is reread",
					info.RefreshAfter, info.Expiration, handlers.RereadAfter)
			}
			if err := info.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestServiceAccountTokenRotation(t *testing.T) {
	isolate(t)
	root, signer := mountServiceAccount(t, "10.96.0.1", true)
	first, _ := ServiceAccount(context.Background())
	rotated := signer.JWT(t, map[string]any{"sub": "system:serviceaccount:ops:operator", "exp": time.Now().Add(30 * time.Second).Unix()})
	writeFile(t, filepath.Join(root, "token"), rotated)
	second, _ := ServiceAccount(context.Background())
	if second.Token != rotated || second.Token == first.Token {
		t.Error("the rotated token was not read")
	}
	if left := time.Until(second.Expiration); left > 31*time.Second {
		t.Errorf("expires in %v, want the JWT's 30 s", left)
	}
}

func TestServiceAccountNamespaceFromEnv(t *testing.T) {
	isolate(t)
	mountServiceAccount(t, "10.96.0.1", true)
	t.Setenv("POD_NAMESPACE", "from-env")
	if info, _ := ServiceAccount(context.Background()); info.DefaultNamespace != "from-env" {
		t.Errorf("namespace = %q, want POD_NAMESPACE's", info.DefaultNamespace)
	}
}

func TestServiceAccountOutsideACluster(t *testing.T) {
	isolate(t)
	if info, err := ServiceAccount(context.Background()); info != nil || err != nil {
		t.Errorf("ServiceAccount() outside a cluster = %v, %v; want nil, nil", info, err)
	}
	// In a cluster, but with no token mounted.
	mountServiceAccount(t, "10.96.0.1", true)
	serviceAccountRoot = t.TempDir()
	if info, err := ServiceAccount(context.Background()); info != nil || err != nil {
		t.Errorf("ServiceAccount() without a token = %v, %v; want nil, nil", info, err)
	}
}
