package aks_test

import (
	"testing"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/nativefuzz"
)

const secretMark = nativefuzz.SecretMark

// fuzzCommands are kubelogin, a fuzzed byte choosing one.
var fuzzCommands = []string{"kubelogin", "/usr/local/bin/kubelogin"}

// FuzzNativeGetToken builds Native's handler (never calling it: no
// network) for a fuzzed `kubelogin get-token` command line (split on NUL)
// and environment (NAME=VALUE, split on NUL): it must not panic nor hang,
// a handler comes with no error, and an error starts with "aks: " and
// quotes no marked secret, neither an environment variable's value nor the
// value of a flag whose name says it is a secret (--client-secret,
// --client-certificate-password…).
func FuzzNativeGetToken(f *testing.F) {
	const spn = "get-token\x00--login\x00spn\x00--server-id\x00" + aks.DefaultServerID + "\x00--client-id\x00c\x00--tenant-id\x00t"
	for _, s := range []struct {
		command   uint8
		args, env string
	}{
		{0, "get-token\x00--login\x00msi\x00--server-id\x00" + aks.DefaultServerID, ""},
		{1, "get-token\x00-l\x00msi\x00--server-id\x00" + aks.DefaultServerID + "\x00--client-id\x00c\x00--timeout=30s", ""},
		{0, "get-token\x00--login=workloadidentity\x00--server-id\x00" + aks.DefaultServerID + "\x00--federated-token-file\x00/f" +
			"\x00--authority-host\x00https://login.example/\x00--disable-instance-discovery", "AZURE_CLIENT_ID=c\x00AZURE_TENANT_ID=t"},
		{0, spn + "\x00--client-secret\x00" + secretMark + "-flag", ""},
		{0, spn + "\x00--client-certificate=/c.pfx\x00--client-certificate-password=" + secretMark + "-inline\x00--environment\x00AzureChinaCloud", ""},
		{0, spn + "\x00--use-azurerm-env-vars", "ARM_CLIENT_SECRET=" + secretMark + "-env"},
		{0, spn, "AZURE_CLIENT_SECRET=" + secretMark + "-env\x00AZURE_PASSWORD=" + secretMark + "-env2"},
		{0, "get-token\x00--login\x00msi\x00--server-id\x00" + aks.DefaultServerID + "\x00--client-secret\x00" + secretMark + "-msi", ""},
		{0, "get-token\x00--server-id\x00" + aks.DefaultServerID, "AAD_LOGIN_METHOD=msi\x00AZURE_CLI_TIMEOUT=10s"},
		{0, "get-token\x00--server-id\x00" + aks.DefaultServerID, "AAD_LOGIN_METHOD=" + secretMark + "-mode"},
		{0, "get-token\x00--login\x00workloadidentity\x00--server-id\x00" + aks.DefaultServerID + "\x00--federated-token-file\x00/f",
			"AZURE_CLIENT_ID=c\x00AZURE_TENANT_ID=t\x00AZURE_AUTHORITY_HOST=" + secretMark + "-host"},
		{0, "--client-secret\x00" + secretMark + "-not-get-token", ""},
		{0, "get-token\x00--login\x00--client-secret=" + secretMark + "-login\x00--server-id\x00" + aks.DefaultServerID, ""},
		{0, "get-token\x00--login\x00msi\x00--server-id\x00" + aks.DefaultServerID + "\x00--environment\x00--client-secret=" + secretMark + "-cloud", ""},
		{0, "get-token\x00--login\x00msi\x00--server-id\x00" + aks.DefaultServerID + "\x00--authority-host\x00--client-secret=" + secretMark + "-host", ""},
		{0, "get-token\x00--login\x00msi\x00--server-id\x00" + aks.DefaultServerID + "\x00" + secretMark + "-word\x00--subscription\x00x", ""},
	} {
		f.Add(s.command, s.args, s.env, false)
		f.Add(s.command, s.args, s.env, true)
	}
	f.Fuzz(func(t *testing.T, command uint8, args, env string, untrusted bool) {
		exec := nativefuzz.Exec(fuzzCommands, command, args, env)
		req := handlers.NativeRequest{Exec: exec, Untrusted: untrusted, Cluster: login.ConnectionInfo{
			Server: "https://prod-dns-1a2b3c.hcp.westeurope.azmk8s.io:443", CAData: []byte("ca")}}
		n := aks.Native() // one a case: its cache of handlers would grow with every input
		nativefuzz.Check(t, "aks: ", exec, func() (login.Handler, error) { return n.Handler(req) })
	})
}
