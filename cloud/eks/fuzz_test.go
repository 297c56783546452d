package eks_test

import (
	"strings"
	"testing"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/nativefuzz"
)

const secretMark = nativefuzz.SecretMark

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
		exec := nativefuzz.Exec(fuzzCommands, command, args, env)
		req := handlers.NativeRequest{Exec: exec, Untrusted: untrusted, Cluster: login.ConnectionInfo{
			Server: "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com", CAData: []byte("ca")}}
		n := eks.NativeWith(eks.NativeOptions{Roles: func(role string) bool { return strings.HasSuffix(role, "/fleet") }})
		nativefuzz.Check(t, "eks: ", exec, func() (login.Handler, error) { return n.Handler(req) })
	})
}
