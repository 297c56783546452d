package eks_test

import (
	"context"
	"fmt"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// The logins of a fleet's clusters share this process's AWS identity: 20
// clusters under IRSA make one web identity exchange, not one each (1,000
// clusters would make 1,000 per credential lifetime, and each kept an SDK
// configuration and HTTP client of its own, for good).
func TestNativeSharesCredentialsAcrossClusters(t *testing.T) {
	s := newSTSStub(t)
	s.webIdentityEnv(t, testWebToken)
	n := eks.Native()
	const clusters = 20
	for i := range clusters {
		h, err := n.Handler(handlers.NativeRequest{
			Exec: clientcmdapi.ExecConfig{Command: "aws",
				Args: []string{"--region", testRegion, "eks", "get-token", "--cluster-name", fmt.Sprintf("c%d", i)}},
			Cluster: login.ConnectionInfo{Server: fmt.Sprintf("https://c%d.example", i)},
		})
		if err != nil {
			t.Fatal(err)
		}
		info, err := h(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if code, body := s.callPresigned(t, presignedURL(t, info.Token), fmt.Sprintf("c%d", i)); code != 200 {
			t.Fatalf("cluster c%d: the token does not verify: %d %s", i, code, body)
		}
	}
	if got := s.count("AssumeRoleWithWebIdentity"); got != 1 {
		t.Errorf("%d clusters made %d web identity exchanges, want 1", clusters, got)
	}
}
