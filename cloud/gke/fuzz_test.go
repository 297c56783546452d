package gke_test

import (
	"testing"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/nativefuzz"
)

const secretMark = nativefuzz.SecretMark

// fuzzCommands are gke-gcloud-auth-plugin, a fuzzed byte choosing one.
var fuzzCommands = []string{"gke-gcloud-auth-plugin", "/usr/lib/google-cloud-sdk/bin/gke-gcloud-auth-plugin"}

// FuzzNativeOptions builds Native's handler (never calling it: no network)
// for fuzzed plugin arguments (split on NUL) and environment (NAME=VALUE,
// split on NUL): it must not panic nor hang, a handler comes with no error,
// and an error starts with "gke: " and quotes no marked secret, neither an
// environment variable's value nor the value of a flag whose name says it
// is a secret.
func FuzzNativeOptions(f *testing.F) {
	for _, s := range []struct {
		command   uint8
		args, env string
	}{
		{0, "--use_application_default_credentials", ""},
		{1, "--use_application_default_credentials\x00--use_application_default_credentials", ""},
		{0, "--use_application_default_credentials\x00--token\x00" + secretMark + "-flag", ""},
		{0, "--use_application_default_credentials\x00--access-token=" + secretMark + "-inline", ""},
		{0, secretMark + "-word\x00--use_application_default_credentials", ""},
		{0, "--use_application_default_credentials", "GOOGLE_APPLICATION_CREDENTIALS=" + secretMark + "-env\x00CLOUDSDK_AUTH_ACCESS_TOKEN=" + secretMark + "-env2"},
	} {
		f.Add(s.command, s.args, s.env, false)
		f.Add(s.command, s.args, s.env, true)
	}
	f.Fuzz(func(t *testing.T, command uint8, args, env string, untrusted bool) {
		exec := nativefuzz.Exec(fuzzCommands, command, args, env)
		req := handlers.NativeRequest{Exec: exec, Untrusted: untrusted, Cluster: login.ConnectionInfo{
			Server: "https://34.118.0.10", CAData: []byte("ca")}}
		n := gke.Native() // one a case: its cache of handlers would grow with every input
		nativefuzz.Check(t, "gke: ", exec, func() (login.Handler, error) { return n.Handler(req) })
	})
}
