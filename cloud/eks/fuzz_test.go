package eks_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// secretMark starts the fuzzed values that count as secrets: a value that
// is also a flag's name or a common word may appear in an error for good
// reason, one that starts with this may not.
const secretMark = "S3CR3T"

// fuzzCommands are the plugins Native serves, a fuzzed byte choosing one.
var fuzzCommands = []string{"aws", "/usr/local/bin/aws", "aws-iam-authenticator", "argocd-k8s-auth"}

// FuzzNativeOptions builds Native's handler (never calling it: no network)
// for fuzzed plugin arguments (split on NUL) and environment (NAME=VALUE,
// split on NUL): it must not panic nor hang, a handler comes with no error,
// and an error starts with "eks: " and quotes no marked secret, neither an
// environment variable's value nor the value of a flag whose name says it
// is a secret.
func FuzzNativeOptions(f *testing.F) {
	for _, s := range []struct {
		command   uint8
		args, env string
	}{
		{0, "--region\x00us-west-2\x00eks\x00get-token\x00--cluster-name\x00prod\x00--output\x00json", ""},
		{1, "eks\x00get-token\x00--cluster-name=prod\x00--role-arn=arn:aws:iam::123456789012:role/fleet", "AWS_REGION=eu-west-1"},
		{2, "token\x00-i\x00prod\x00-r\x00arn:aws:iam::123456789012:role/fleet\x00--region\x00us-west-2", ""},
		{3, "aws\x00--cluster-name\x00prod", "AWS_STS_REGIONAL_ENDPOINTS=regional\x00AWS_PROFILE=ops"},
		{0, "eks\x00get-token\x00--cluster-name\x00prod\x00--output\x00yaml", ""},
		{0, "eks\x00get-token\x00--cluster-name\x00prod\x00--token\x00" + secretMark + "-flag", ""},
		{0, "eks\x00get-token\x00--cluster-name\x00prod\x00--client-secret=" + secretMark + "-inline", ""},
		{0, "eks\x00get-token\x00--cluster-name\x00prod", "AWS_SECRET_ACCESS_KEY=" + secretMark + "-env\x00AWS_SESSION_TOKEN=" + secretMark + "-env2"},
		{3, secretMark + "-word\x00aws\x00--cluster-name", "AWS_REGION=" + secretMark + "-region"},
		{0, "eks\x00get-token\x00--cluster-name\x00prod\x00--output\x00--token=" + secretMark + "-output", ""},
		{0, "eks\x00get-token\x00--cluster-name\x00prod\x00--role-arn\x00--client-secret=" + secretMark + "-role", ""},
		{0, "eks\x00get-token\x00--cluster-name\x00--token=" + secretMark + "-cluster\x00--profile\x00ops", ""},
	} {
		f.Add(s.command, s.args, s.env, false)
		f.Add(s.command, s.args, s.env, true)
	}
	f.Fuzz(func(t *testing.T, command uint8, args, env string, untrusted bool) {
		exec := clientcmdapi.ExecConfig{Command: fuzzCommands[int(command)%len(fuzzCommands)], Args: splitArgs(args), Env: splitEnv(env)}
		req := handlers.NativeRequest{Exec: exec, Untrusted: untrusted, Cluster: login.ConnectionInfo{
			Server: "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com", CAData: []byte("ca")}}
		n := eks.NativeWith(eks.NativeOptions{Roles: func(role string) bool { return strings.HasSuffix(role, "/fleet") }})
		h, err := buildWithin(t, 5*time.Second, func() (login.Handler, error) { return n.Handler(req) })
		checkBuilt(t, "eks: ", exec, h, err)
	})
}

// splitArgs are the arguments s holds, NUL between them.
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// splitEnv are the variables s holds, NAME=VALUE, NUL between them.
func splitEnv(s string) []clientcmdapi.ExecEnvVar {
	var env []clientcmdapi.ExecEnvVar
	for _, kv := range splitArgs(s) {
		name, value, _ := strings.Cut(kv, "=")
		env = append(env, clientcmdapi.ExecEnvVar{Name: name, Value: value})
	}
	return env
}

// buildWithin is build's result, or a fatal error when it takes longer than
// limit (far more than parsing a command line needs, so that a loaded
// machine does not fail it): a hang is reported with its input.
func buildWithin(t *testing.T, limit time.Duration, build func() (login.Handler, error)) (login.Handler, error) {
	t.Helper()
	type built struct {
		h   login.Handler
		err error
	}
	done := make(chan built, 1)
	go func() {
		h, err := build()
		done <- built{h, err}
	}()
	select {
	case b := <-done:
		return b.h, b.err
	case <-time.After(limit):
		t.Fatalf("building the handler took more than %v", limit)
		return nil, nil
	}
}

// secretWords in a flag's name make its value a secret.
var secretWords = []string{"secret", "token", "password", "assertion", "certificate"}

// markedSecrets are the values of exec that are secrets and start with
// secretMark: those of its variables, and those of its flags whose names
// say so (`--flag value` or `--flag=value`). A value that is also part of
// another argument, of a variable's name or of the command may appear in
// an error through that one, and is left out.
func markedSecrets(exec clientcmdapi.ExecConfig) []string {
	var secrets []string
	others := []string{exec.Command}
	for _, v := range exec.Env {
		secrets, others = append(secrets, v.Value), append(others, v.Name)
	}
	holds := make([]bool, len(exec.Args)) // a secret, inline or as the next argument
	for i, a := range exec.Args {
		name, value, inline := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "-") || !containsAny(strings.ToLower(name), secretWords) {
			continue
		}
		switch {
		case inline:
			holds[i] = true
		case i+1 < len(exec.Args):
			value, holds[i+1] = exec.Args[i+1], true
		}
		secrets = append(secrets, value)
	}
	for i, a := range exec.Args {
		if !holds[i] {
			others = append(others, a)
		}
	}
	var marked []string
	for _, s := range secrets {
		if strings.HasPrefix(s, secretMark) && !slices.ContainsFunc(others, func(o string) bool { return strings.Contains(o, s) }) {
			marked = append(marked, s)
		}
	}
	return marked
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// checkBuilt fails t when a handler was built with an error, or none
// without one, or when the error does not start with prefix or quotes a
// marked secret of exec.
func checkBuilt(t *testing.T, prefix string, exec clientcmdapi.ExecConfig, h login.Handler, err error) {
	t.Helper()
	if err == nil {
		if h == nil {
			t.Fatal("no handler and no error")
		}
		return
	}
	if h != nil {
		t.Errorf("a handler with the error %v", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		t.Errorf("error %q does not start with %q", msg, prefix)
	}
	for _, s := range markedSecrets(exec) {
		if strings.Contains(msg, s) {
			t.Errorf("error %q quotes the secret %q", msg, s)
		}
	}
}
