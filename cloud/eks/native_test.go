package eks_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// staticEnv sets this process's environment to the test's static keys,
// with STS and EKS at the stand-in: what Native's logins take.
func (s *stsStub) staticEnv(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_ENDPOINT_URL", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
	}
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, s.caPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "no-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", testKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecret)
	t.Setenv("AWS_ENDPOINT_URL_STS", s.srv.URL)
	t.Setenv("AWS_ENDPOINT_URL_EKS", s.srv.URL)
	t.Setenv("AWS_CA_BUNDLE", ca)
}

// useNative makes Native serve for one test.
func useNative(t *testing.T) {
	handlers.UseNative(eks.Native())
	t.Cleanup(func() { handlers.UseNative(handlers.Native{Name: "eks"}) }) // serves nothing
}

// The plugins that make EKS tokens, as kubeconfigs name them, are served
// by Login with their parameters: no process runs, the token verifies at
// STS for the cluster named, with the role named.
func TestNativeServesTheEKSPlugins(t *testing.T) {
	s := newSTSStub(t)
	s.staticEnv(t)
	useNative(t)
	cluster := login.ConnectionInfo{Server: testServer, CAData: s.caPEM()}
	for _, tt := range []struct {
		name    string
		command string
		args    []string
		env     []clientcmdapi.ExecEnvVar
		role    bool
	}{
		{"aws eks get-token", "aws", []string{"--region", testRegion, "eks", "get-token", "--cluster-name", testCluster, "--output", "json"}, nil, false},
		{"aws, flags with =", "/usr/local/bin/aws", []string{"eks", "get-token", "--cluster-name=" + testCluster, "--role-arn=" + testRoleARN},
			[]clientcmdapi.ExecEnvVar{{Name: "AWS_REGION", Value: testRegion}}, true},
		{"aws-iam-authenticator", "aws-iam-authenticator", []string{"token", "-i", testCluster, "-r", testRoleARN, "--region", testRegion}, nil, true},
		{"argocd-k8s-auth", "argocd-k8s-auth", []string{"aws", "--cluster-name", testCluster},
			[]clientcmdapi.ExecEnvVar{{Name: "AWS_DEFAULT_REGION", Value: testRegion}, {Name: "AWS_STS_REGIONAL_ENDPOINTS", Value: "regional"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assumed := s.count("AssumeRole")
			info, err := handlers.Exec(handlers.ExecConfig{ExecConfig: clientcmdapi.ExecConfig{
				Command: tt.command, Args: tt.args, Env: tt.env, APIVersion: "client.authentication.k8s.io/v1beta1",
			}, Cluster: cluster})(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if info.Server != testServer || !bytes.Equal(info.CAData, s.caPEM()) || info.Expiration.IsZero() {
				t.Errorf("got %v, want the kubeconfig's server and CA, and an expiry", info)
			}
			if code, body := s.callPresigned(t, presignedURL(t, info.Token), testCluster); code != http.StatusOK {
				t.Errorf("the token does not verify for %s: %d %s", testCluster, code, body)
			}
			if got := s.count("AssumeRole") - assumed; (got == 1) != tt.role {
				t.Errorf("AssumeRole called %d times, role named: %v", got, tt.role)
			}
		})
	}
}

// A parameter Native does not understand is an error naming it, never
// ignored: no token is made.
func TestNativeRefusesUnknownParameters(t *testing.T) {
	s := newSTSStub(t)
	s.staticEnv(t)
	useNative(t)
	for _, tt := range []struct {
		args []string
		env  []clientcmdapi.ExecEnvVar
		want string
	}{
		{[]string{"eks", "get-token", "--cluster-name", testCluster, "--cluster-id", "x"}, nil, `argument "--cluster-id" is not one`},
		{[]string{"eks", "get-token", "--cluster-name", testCluster, "--output", "yaml"}, nil, `--output "yaml"`},
		{[]string{"eks", "get-token", "--cluster-name"}, nil, `"--cluster-name" has no value`},
		{[]string{"eks", "get-token", "extra", "--cluster-name", testCluster}, nil, `argument 3 is neither a flag this login understands nor part of "eks get-token"`},
		// A positional argument may be a secret: the error gives its place, not its text.
		{[]string{"from-the-kubeconfig", "eks", "get-token", "--cluster-name", testCluster}, nil, `argument 1 is not "eks"`},
		{[]string{"eks", "get-token", "--region", testRegion}, nil, "no cluster name"},
		{[]string{"eks", "get-token", "--cluster-name", testCluster}, []clientcmdapi.ExecEnvVar{{Name: "AWS_SECRET_ACCESS_KEY", Value: "from-the-kubeconfig"}},
			"environment variable AWS_SECRET_ACCESS_KEY is not one"},
	} {
		_, err := handlers.Exec(handlers.ExecConfig{ExecConfig: clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1beta1", Command: "aws", Args: tt.args, Env: tt.env},
			Cluster: login.ConnectionInfo{Server: testServer}})(context.Background())
		var perm *login.PermanentError
		if !errors.As(err, &perm) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q %v: %v, want a permanent error with %q", tt.args, tt.env, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "from-the-kubeconfig") {
			t.Errorf("the error quotes a value of the environment or the arguments: %v", err)
		}
	}
	if n := s.count("GetCallerIdentity") + s.count("AssumeRole"); n != 0 {
		t.Errorf("%d calls reached STS", n)
	}
}

// A kubeconfig in a Secret may use Native only when its policy says so;
// then its server must be the cluster's endpoint (DescribeCluster), else no
// token is made, and the CA is the cluster's, not the Secret's.
func TestNativeFromASecretChecksTheServer(t *testing.T) {
	s := newSTSStub(t)
	s.staticEnv(t)
	useNative(t)
	kubeconfig := func(server, ca string) []byte {
		return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: u
  user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws, args: [--region, %s, eks, get-token, --cluster-name, %s], interactiveMode: Never}}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, server, ca, testRegion, testCluster)
	}
	secretCA := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
	read := func(server string, policy handlers.PluginPolicy) (*login.ConnectionInfo, error) {
		hub := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k"},
			Data: map[string][]byte{"value": kubeconfig(server, secretCA)}})
		return handlers.KubeconfigSecretFrom(handlers.KubeconfigSecretConfig{Client: hub.CoreV1(), Namespace: "ns", Name: "k",
			PluginPolicy: policy})(context.Background())
	}

	if _, err := read(testEndpoint, handlers.DenyAll); err == nil || !strings.Contains(err.Error(), "handlers.AllowNative") {
		t.Errorf("under DenyAll: %v, want a refusal naming AllowNative", err)
	}
	allowed := handlers.AllowNative(handlers.DenyAll, "eks")
	info, err := read("https://attacker.example", allowed)
	var perm *login.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "is not the cluster's endpoint") || info != nil {
		t.Errorf("a server of the Secret's choosing: %v, %v; want no token and a permanent error", info, err)
	}
	if n := s.count("GetCallerIdentity"); n != 0 {
		t.Errorf("%d tokens made for another server", n)
	}
	hub := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k"},
		Data: map[string][]byte{"value": bytes.Replace(kubeconfig(testEndpoint, secretCA), []byte("--cluster-name,"), []byte("--profile, admin, --cluster-name,"), 1)}})
	_, err = handlers.KubeconfigSecretFrom(handlers.KubeconfigSecretConfig{Client: hub.CoreV1(), Namespace: "ns", Name: "k", PluginPolicy: allowed})(context.Background())
	if err == nil || !strings.Contains(err.Error(), "may not name an AWS profile") {
		t.Errorf("a Secret naming a profile: %v, want a refusal", err)
	}
	info, err = read(testEndpoint, allowed)
	if err != nil {
		t.Fatal(err)
	}
	if info.Server != testEndpoint || !bytes.Equal(info.CAData, s.caPEM()) {
		t.Errorf("got %v, want the cluster's endpoint and CA", info)
	}
	if code, _ := s.callPresigned(t, presignedURL(t, info.Token), testCluster); code != http.StatusOK {
		t.Errorf("the token does not verify: %d", code)
	}
}

// An Argo CD Secret's awsAuthConfig names no region, and a hub's clusters
// are in several: the region is the one in the endpoint's name, not this
// process's, so DescribeCluster finds the cluster where it is.
func TestNativeTakesTheRegionFromTheEndpoint(t *testing.T) {
	s := newSTSStub(t)
	s.staticEnv(t)
	t.Setenv("AWS_REGION", "us-east-1") // this process's; the cluster is in testRegion
	useNative(t)
	info, err := handlers.Exec(handlers.ExecConfig{ExecConfig: clientcmdapi.ExecConfig{
		Command: "argocd-k8s-auth", Args: []string{"aws", "--cluster-name", testCluster},
		APIVersion: "client.authentication.k8s.io/v1beta1", PluginPolicy: handlers.AllowNative(handlers.DenyAll, "eks"),
	}, Cluster: login.ConnectionInfo{Server: testEndpoint}})(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Server != testEndpoint || s.count("DescribeCluster") != 1 {
		t.Errorf("got %v after %d DescribeCluster calls, want the endpoint after 1", info, s.count("DescribeCluster"))
	}
	if code, _ := s.callPresigned(t, presignedURL(t, info.Token), testCluster); code != http.StatusOK {
		t.Errorf("the token does not verify: %d", code)
	}
}

// A role a kubeconfig names is quoted in errors, so that one from a Secret
// cannot forge a log line.
func TestNativeQuotesTheRole(t *testing.T) {
	s := newSTSStub(t)
	s.staticEnv(t)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-key") // STS refuses: the error names the role
	useNative(t)
	forged := testRoleARN + "\nlevel=info msg=\"login succeeded\""
	_, err := handlers.Exec(handlers.ExecConfig{ExecConfig: clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1beta1", Command: "aws", Args: []string{"--region", testRegion, "eks", "get-token", "--cluster-name", testCluster, "--role-arn", forged},
	}, Cluster: login.ConnectionInfo{Server: testServer}})(context.Background())
	if err == nil || strings.Contains(err.Error(), "\nlevel=") || !strings.Contains(err.Error(), `assuming role "`) {
		t.Errorf("error = %q, want the role quoted, its line break escaped", err)
	}
}

// NativeOptions.Roles decides which roles a Secret's kubeconfig may have
// this process assume: one it refuses is a permanent error and asks
// nothing of AWS; one it allows logs in; a kubeconfig of this machine's is
// not asked about.
func TestNativeRolesFromASecret(t *testing.T) {
	s := newSTSStub(t)
	s.staticEnv(t)
	var asked []string
	handlers.UseNative(eks.NativeWith(eks.NativeOptions{Roles: func(arn string) bool {
		asked = append(asked, arn)
		return arn == testRoleARN
	}}))
	t.Cleanup(func() { handlers.UseNative(handlers.Native{Name: "eks"}) })
	exec := func(role string, policy handlers.PluginPolicy) clientcmdapi.ExecConfig {
		return clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1beta1", PluginPolicy: policy,
			Args: []string{"--region", testRegion, "eks", "get-token", "--cluster-name", testCluster, "--role-arn", role}}
	}
	allowed := handlers.AllowNative(handlers.DenyAll, "eks")
	other := "arn:aws:iam::111122223333:role/someone-elses"

	_, err := handlers.Exec(handlers.ExecConfig{ExecConfig: exec(other, allowed), Cluster: login.ConnectionInfo{Server: testEndpoint}})(context.Background())
	var perm *login.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "eks.NativeOptions.Roles") {
		t.Errorf("a role the option refuses: %v, want a permanent error naming the option", err)
	}
	if n := s.count("AssumeRole") + s.count("DescribeCluster"); n != 0 {
		t.Errorf("%d calls to AWS for a refused role", n)
	}
	info, err := handlers.Exec(handlers.ExecConfig{ExecConfig: exec(testRoleARN, allowed), Cluster: login.ConnectionInfo{Server: testEndpoint}})(context.Background())
	if err != nil || info.Token == "" {
		t.Fatalf("a role the option allows: %v, %v", info, err)
	}
	if _, err := handlers.Exec(handlers.ExecConfig{ExecConfig: exec(other, handlers.AllowAll), Cluster: login.ConnectionInfo{Server: testEndpoint, CAData: s.caPEM()}})(context.Background()); err != nil {
		t.Errorf("a kubeconfig of this machine's: %v", err)
	}
	if strings.Join(asked, ",") != other+","+testRoleARN {
		t.Errorf("the option was asked about %q, want the two Secrets' roles only", asked)
	}
}

// A flag whose value is missing does not take the next argument, a flag,
// as its value, and --output quotes only an output format: an argument may
// be a secret, and errors reach logs. (Inputs FuzzNativeOptions checks.)
func TestNativeErrorsQuoteNoOtherArgument(t *testing.T) {
	const secret = "--token=from-the-kubeconfig"
	n := eks.NativeWith(eks.NativeOptions{Roles: func(string) bool { return false }})
	for _, tt := range []struct {
		command string
		args    []string
		want    string
	}{
		{"aws", []string{"eks", "get-token", "--cluster-name", testCluster, "--output", secret}, `argument "--output" has no value`},
		{"aws", []string{"eks", "get-token", "--cluster-name", testCluster, "--output=" + secret}, `--output: only json`},
		{"aws", []string{"eks", "get-token", "--cluster-name", testCluster, "--role-arn", secret}, `argument "--role-arn" has no value`},
		{"aws", []string{"eks", "get-token", "--cluster-name", secret, "--profile", "ops"}, `argument "--cluster-name" has no value`},
		{"aws-iam-authenticator", []string{"token", "-i", testCluster, "-r", secret}, `argument "-r" has no value`},
		{"argocd-k8s-auth", []string{"aws", "--cluster-name", secret}, `argument "--cluster-name" has no value`},
	} {
		_, err := n.Handler(handlers.NativeRequest{Exec: clientcmdapi.ExecConfig{Command: tt.command, Args: tt.args},
			Cluster: login.ConnectionInfo{Server: testServer}, Untrusted: true})
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "from-the-kubeconfig") {
			t.Errorf("%s %q: %v, want an error with %q, without the next argument", tt.command, tt.args, err, tt.want)
		}
	}
}

// A flag given twice, or a variable set twice, counts at its last value,
// as the plugins take it (pflag, argparse, a process's environment), and
// AWS_REGION wins over AWS_DEFAULT_REGION wherever it is, as the SDKs and
// the aws CLI v2 read them: the native login logs in as the plugin would
// have, to the same cluster, region and role.
func TestNativeTakesTheLastValue(t *testing.T) {
	s := newSTSStub(t)
	s.staticEnv(t)
	useNative(t)
	const other = "arn:aws:iam::111122223333:role/first-given"
	env := func(kv ...string) []clientcmdapi.ExecEnvVar {
		var out []clientcmdapi.ExecEnvVar
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, clientcmdapi.ExecEnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tt := range []struct {
		command string
		args    []string
		env     []clientcmdapi.ExecEnvVar
		role    string // the role AssumeRole must be asked for, if any
	}{
		{"aws-iam-authenticator", []string{"token", "-i", "first", "-r", other, "--region", "us-east-1",
			"--cluster-id", testCluster, "--role=" + testRoleARN, "--region=" + testRegion}, nil, testRoleARN},
		{"aws-iam-authenticator", []string{"token", "--cluster-id=first", "-i", testCluster, "--role", other, "-r=" + testRoleARN}, env("AWS_REGION", testRegion), testRoleARN},
		{"aws", []string{"--region", "us-east-1", "eks", "get-token", "--cluster-name", "first", "--role-arn", other,
			"--cluster-name=" + testCluster, "--role-arn", testRoleARN, "--region", testRegion}, nil, testRoleARN},
		{"argocd-k8s-auth", []string{"aws", "--cluster-name", "first", "--role-arn", other, "--cluster-name", testCluster, "--role-arn=" + testRoleARN},
			env("AWS_REGION", "us-east-1", "AWS_REGION", testRegion), testRoleARN},
		{"aws", []string{"eks", "get-token", "--cluster-name", testCluster}, env("AWS_DEFAULT_REGION", "us-east-1", "AWS_REGION", testRegion), ""},
		{"aws", []string{"eks", "get-token", "--cluster-name", testCluster}, env("AWS_REGION", testRegion, "AWS_DEFAULT_REGION", "us-east-1"), ""},
		{"aws", []string{"eks", "get-token", "--cluster-name", testCluster}, env("AWS_DEFAULT_REGION", "us-east-1", "AWS_DEFAULT_REGION", testRegion), ""},
	} {
		before := len(s.roles())
		info, err := handlers.Exec(handlers.ExecConfig{ExecConfig: clientcmdapi.ExecConfig{Command: tt.command, Args: tt.args, Env: tt.env,
			APIVersion: "client.authentication.k8s.io/v1beta1"}, Cluster: login.ConnectionInfo{Server: testServer, CAData: s.caPEM()}})(context.Background())
		if err != nil {
			t.Errorf("%s %q %v: %v", tt.command, tt.args, tt.env, err)
			continue
		}
		if code, body := s.callPresigned(t, presignedURL(t, info.Token), testCluster); code != http.StatusOK {
			t.Errorf("%s %q %v: the token does not verify for %s in %s: %d %s", tt.command, tt.args, tt.env, testCluster, testRegion, code, body)
		}
		var want []string
		if tt.role != "" {
			want = []string{tt.role}
		}
		if got := s.roles()[before:]; !slices.Equal(got, want) {
			t.Errorf("%s %q: AssumeRole asked for %q, want %q", tt.command, tt.args, got, want)
		}
	}
}
