package eks_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/aws-iam-authenticator/pkg/token"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/peers"
	"github.com/authvault/authvault/vault"
)

// pluginExec is the exec plugin aws-iam-authenticator (the real binary,
// from AUTHVAULT_PEERS) as a kubeconfig names it for cluster, with the
// test's static keys in its environment and a HOME, config and
// credentials files of its own, so that nothing of this machine's AWS
// setup reaches it. AWS_STS_REGIONAL_ENDPOINTS makes its SDK (v1) presign
// for the region's STS host, as eks.Login does, instead of the global one.
func pluginExec(tb testing.TB, cluster string, args ...string) handlers.ExecConfig {
	tb.Helper()
	dir := tb.TempDir()
	return handlers.ExecConfig{
		ExecConfig: clientcmdapi.ExecConfig{
			Command:    peers.Binary(tb, "aws-iam-authenticator"),
			Args:       append([]string{"token", "-i", cluster}, args...),
			APIVersion: "client.authentication.k8s.io/v1beta1",
			Env: []clientcmdapi.ExecEnvVar{
				{Name: "HOME", Value: dir},
				{Name: "AWS_ACCESS_KEY_ID", Value: testKeyID},
				{Name: "AWS_SECRET_ACCESS_KEY", Value: testSecret},
				{Name: "AWS_SESSION_TOKEN", Value: ""},
				{Name: "AWS_REGION", Value: testRegion},
				{Name: "AWS_STS_REGIONAL_ENDPOINTS", Value: "regional"},
				{Name: "AWS_PROFILE", Value: ""},
				{Name: "AWS_CONFIG_FILE", Value: filepath.Join(dir, "no-config")},
				{Name: "AWS_SHARED_CREDENTIALS_FILE", Value: filepath.Join(dir, "no-credentials")},
				{Name: "AWS_EC2_METADATA_DISABLED", Value: "true"},
			},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		},
		Cluster: login.ConnectionInfo{Server: testServer},
	}
}

// The real aws-iam-authenticator, run as the exec plugin it is by
// handlers.Exec under a vault, and eks.Login, with the same keys: both
// tokens pass aws-iam-authenticator's own verification (its token
// package's Verifier, whose GetCallerIdentity the stand-in answers after
// checking the SigV4 signature) as the same identity, for the cluster they
// name only, and both expire 14 minutes after signing.
//
// No native login is in use here (handlers.UseNative), so Exec runs the
// binary; TestNativeServesTheEKSPlugins covers the same command served
// natively.
func TestAWSIAMAuthenticatorPluginAndNativeVerifyAlike(t *testing.T) {
	s := newSTSStub(t)
	routeDefaultTransportTo(t, s)

	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(handlers.Exec(pluginExec(t, testCluster)), login.Timeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cred, err := v.Select(ctx)
	if err != nil {
		t.Fatalf("the vault with aws-iam-authenticator as its plugin: %v", err)
	}
	plugin := cred.Info

	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.STSEndpoint = "" // the region's real host, which the Verifier requires
	native, err := eks.Login(opts)(ctx)
	if err != nil {
		t.Fatal(err)
	}

	for _, tok := range []struct {
		name string
		info *login.ConnectionInfo
	}{{"plugin", plugin}, {"native", native}} {
		id, err := token.NewVerifier(testCluster, "aws", testRegion).Verify(tok.info.Token)
		if err != nil {
			t.Errorf("%s: aws-iam-authenticator's Verifier refuses the token: %v", tok.name, err)
			continue
		}
		if id.ARN != testUserARN || id.AccessKeyID != testKeyID || id.AccountID != testAccount {
			t.Errorf("%s: identity %s (key %s, account %s), want %s with key %s", tok.name, id.ARN, id.AccessKeyID, id.AccountID, testUserARN, testKeyID)
		}
		if _, err := token.NewVerifier("other", "aws", testRegion).Verify(tok.info.Token); err == nil {
			t.Errorf("%s: the Verifier of another cluster accepts the token", tok.name)
		}
		if left := time.Until(tok.info.Expiration); left < 13*time.Minute || left > 14*time.Minute {
			t.Errorf("%s: expires in %v, want 14 min after signing", tok.name, left.Round(time.Second))
		}
	}
	if plugin.Server != testServer {
		t.Errorf("plugin: server %q, want the kubeconfig's %q", plugin.Server, testServer)
	}
	if got := s.count("GetCallerIdentity"); got != 2 {
		t.Errorf("the stand-in answered %d GetCallerIdentity, want 2 (one per token verified for %s)", got, testCluster)
	}
}
