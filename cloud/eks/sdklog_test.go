package eks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
	"github.com/go-logr/logr"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/testkit/testlog"
)

// imdsStub stands for EC2's instance metadata service without IMDSv2: it
// refuses the session token (403, as an instance whose metadata options
// turn the token off, or a proxy in the way), so the SDK falls back to
// IMDSv1 and says so with a WARN line; it serves a role's credentials.
func imdsStub(t *testing.T, keyID, secret, session string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			http.Error(w, "forbidden", http.StatusForbidden)
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
			_, _ = io.WriteString(w, "node-role")
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/node-role":
			_ = json.NewEncoder(w).Encode(map[string]string{
				"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": keyID, "SecretAccessKey": secret, "Token": session,
				"LastUpdated": time.Now().UTC().Format(time.RFC3339), "Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// imdsEnv sets the environment of an EC2 node whose credentials come from
// IMDS at endpoint, and nothing else to find.
func imdsEnv(t *testing.T, endpoint string) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_DEFAULT_PROFILE", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_EC2_METADATA_DISABLED",
		"AWS_EC2_METADATA_V1_DISABLED"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_REGION", testRegion)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "no-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-credentials"))
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint)
}

// stderrDuring runs f with os.Stderr a pipe, and returns what f wrote to it.
func stderrDuring(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		read <- b.String()
	}()
	saved := os.Stderr
	os.Stderr = w
	defer func() {
		os.Stderr = saved
		w.Close()
	}()
	f()
	os.Stderr = saved
	w.Close()
	out := <-read
	r.Close()
	return out
}

// Issue 32, item 8: the AWS SDK's own lines (here its WARN "falling back to
// IMDSv1", which went to stderr) reach the handler's logger, the one in its
// context, and stderr gets nothing; no credential is in them.
func TestSDKLogsGoToTheHandlersLogger(t *testing.T) {
	const keyID, secret, session = "ASIAIMDSNODEROLE0001", "imds-secret-key-do-not-log", "imds-session-do-not-log"
	imdsEnv(t, imdsStub(t, keyID, secret, session))
	var logs testlog.Buffer
	ctx := logr.NewContext(context.Background(), logs.Logger(1).WithValues("handler", "eks prod"))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	var tok string
	stderr := stderrDuring(t, func() {
		info, err := eks.Login(eks.Options{Cluster: testCluster, Server: testServer})(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tok = info.Token
	})
	if strings.Contains(stderr, "IMDSv1") {
		t.Errorf("the SDK's warning went to stderr: %q", stderr)
	}
	out := logs.String()
	if !strings.Contains(out, "falling back to IMDSv1") || !strings.Contains(out, `"handler"="eks prod"`) {
		t.Errorf("the SDK's warning is not in the handler's log:\n%s", out)
	}
	assertNoSecret(t, "the log", out, secret, session, tok)
}

// A configuration of the caller's (Options.AWS) keeps its logger: the
// SDK's lines go there, not to the handler's.
func TestSDKLogsOfTheCallersConfig(t *testing.T) {
	imdsEnv(t, imdsStub(t, "ASIAIMDSNODEROLE0002", "imds-secret-2", "imds-session-2"))
	var logs testlog.Buffer
	ctx := logr.NewContext(context.Background(), logs.Logger(1))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var own bytes.Buffer
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(loggerTo(&own)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eks.Login(eks.Options{Cluster: testCluster, Server: testServer, AWS: &cfg})(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(own.String(), "falling back to IMDSv1") || strings.Contains(logs.String(), "IMDSv1") {
		t.Errorf("the SDK's warning went to the handler's log:\n%s\nnot to the caller's logger:\n%s", logs.String(), own.String())
	}
}

// loggerTo is an SDK logger of the caller's own.
func loggerTo(b *bytes.Buffer) logging.Logger { return logging.NewStandardLogger(b) }
