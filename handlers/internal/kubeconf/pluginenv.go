package kubeconf

import (
	"fmt"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// An Allowlist says which programs may run; it cannot say what they do.
// A plugin's environment decides much of that: a bash plugin runs the
// functions BASH_FUNC_name%% defines and the file (or the command
// substitution) BASH_ENV names, the dynamic loader preloads what LD_PRELOAD
// names, Python, Node, Perl and Ruby take code from their *OPTIONS and path
// variables, gcloud runs the interpreter CLOUDSDK_PYTHON names, PATH picks
// every program the plugin starts. And it decides where the plugin sends
// this process's own secrets: the AWS SDKs post the web identity token
// file's content to the STS endpoint and the container token to the
// credentials URI, kubelogin posts the federated token file's to the
// authority host, gcloud hands out an access token file's content as the
// token (which then goes to the Secret's server), a plain-http proxy sees
// the metadata services' answers. So under any policy but AllowAll, the
// exec env of the config (a kubeconfig's, a Secret's: written by someone
// other than this process) may not set such a variable. The plugin still
// inherits this process's own environment, which the operator's author
// chose: a plugin that needs PATH or PYTHONPATH gets it from there.
//
// This is checked where the config is mapped (applyPolicy), since a config
// that only client-go can serve (impersonation) has client-go run the
// plugin itself, and again by handlers.Exec, for an ExecConfig built by
// hand.

// steeringEnv are the variables, upper-cased, that load code, choose the
// programs a plugin runs, or choose where it sends this process's secrets.
var steeringEnv = map[string]bool{
	"PATH": true, "IFS": true, "ENV": true, "BASH_ENV": true, "SHELLOPTS": true, "BASHOPTS": true,
	"PS0": true, "PS1": true, "PS2": true, "PS4": true, "PROMPT_COMMAND": true, "CDPATH": true,
	"GLOBIGNORE": true, "ZDOTDIR": true, "BASH_XTRACEFD": true,
	// glibc's list of what it drops for a program run across a privilege
	// boundary (unsecvars.h), less the LD_ and MALLOC_ families below.
	"GCONV_PATH": true, "GETCONF_DIR": true, "GLIBC_TUNABLES": true, "HOSTALIASES": true, "LOCALDOMAIN": true,
	"LOCPATH": true, "NIS_PATH": true, "NLSPATH": true, "RESOLV_HOST_CONF": true, "RES_OPTIONS": true,
	"TMPDIR": true, "TZDIR": true,
	"OPENSSL_CONF": true, "OPENSSL_ENGINES": true, "OPENSSL_MODULES": true,
	"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true, "CLASSPATH": true,
	"PHPRC": true, "PHP_INI_SCAN_DIR": true,
	"BROWSER": true, "EDITOR": true, "VISUAL": true, "PAGER": true, "AWS_PAGER": true, "LESSOPEN": true, "LESSCLOSE": true,
	// GODEBUG=http2debug=2 has a Go plugin print every header it sends,
	// Authorization included, to the stderr this process logs.
	"GODEBUG": true, "SSLKEYLOGFILE": true,
	// Files a plugin reads its own configuration from, which can name a
	// command to run (AWS's credential_process, a kubeconfig's exec, a
	// Google external account's executable).
	"KUBECONFIG": true, "AWS_CONFIG_FILE": true, "AWS_SHARED_CREDENTIALS_FILE": true, "GOOGLE_APPLICATION_CREDENTIALS": true,
	"GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES": true, "AZURE_CONFIG_DIR": true, "CURL_HOME": true,
	"XDG_CONFIG_HOME": true, "XDG_CONFIG_DIRS": true, "HOME": true,
	// Files of this machine whose content a plugin sends, and where it
	// sends it: a token file named here can be the pod's ServiceAccount
	// token.
	"AWS_WEB_IDENTITY_TOKEN_FILE": true, "AWS_CONTAINER_CREDENTIALS_FULL_URI": true,
	"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": true, "AWS_ENDPOINT_URL": true,
	"AZURE_FEDERATED_TOKEN_FILE": true, "AZURE_AUTHORITY_HOST": true, "AZURE_CLIENT_CERTIFICATE_PATH": true,
	"AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE": true, "ARM_CLIENT_CERTIFICATE_PATH": true,
	// kubelogin (azidentity) sends the CI's own request token to these:
	// GitHub Actions' ACTIONS_ID_TOKEN_REQUEST_TOKEN, Azure Pipelines'
	// SYSTEM_ACCESSTOKEN.
	"ACTIONS_ID_TOKEN_REQUEST_URL": true, "SYSTEM_OIDCREQUESTURI": true,
	// Whom the plugin's TLS trusts, and a proxy that sees its plain-http
	// requests (the instance metadata and EKS Pod Identity endpoints): Go
	// and Python exempt only loopback from HTTP_PROXY.
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "REQUESTS_CA_BUNDLE": true, "CURL_CA_BUNDLE": true,
	"AWS_CA_BUNDLE": true, "HTTP_PROXY": true, "ALL_PROXY": true,
}

// steeringEnvPrefixes are families of such variables. CLOUDSDK_ is every
// gcloud property (its interpreter, config directory, token host, API
// endpoints, proxy, CA, access token file).
var steeringEnvPrefixes = []string{
	"LD_", "DYLD_", "BASH_FUNC_", "PYTHON", "PERL", "RUBY", "GEM_", "BUNDLE_", "NODE_", "NPM_CONFIG_",
	"LUA_", "TCL", "GIT_", "DOTNET_", "COMPLUS_", "CORECLR_", "CLOUDSDK_", "MALLOC_", "AWS_ENDPOINT_URL_",
}

// PluginEnvAllowed returns nil when policy lets env reach an exec plugin:
// always under AllowAll (and the zero policy, client-go's default), and
// otherwise only names that are plain identifiers and do not steer the
// plugin (steeringEnv), with values without line breaks or NUL (which would
// let one variable forge lines of a file the plugin reads, /proc/self/environ
// as an ini file). The error names the variable, never its value, and has
// no package prefix.
func PluginEnvAllowed(policy clientcmdapi.PluginPolicy, env []clientcmdapi.ExecEnvVar) error {
	if policy.PolicyType == "" || policy.PolicyType == clientcmdapi.PluginPolicyAllowAll {
		return nil
	}
	for _, e := range env {
		why := steers(e.Name)
		if why == "" && strings.ContainsAny(e.Value, "\x00\r\n") {
			why = "its value holds a line break or NUL"
		}
		if why != "" {
			return fmt.Errorf("env %q is not allowed under plugin policy %s: %s; set it in this process's own environment if the plugin needs it",
				shownEnvName(e.Name), policy.PolicyType, why)
		}
	}
	return nil
}

// maxShownEnvName bounds the part of a refused name an error quotes.
const maxShownEnvName = 64

// shownEnvName is what an error quotes of a refused name: nothing after an
// "=" (the plugin would get the rest as the value: NAME=secret=value), and
// no more than maxShownEnvName bytes.
func shownEnvName(name string) string {
	if i := strings.IndexByte(name, '='); i >= 0 {
		name = name[:i] + "=…"
	}
	if len(name) > maxShownEnvName {
		name = strings.ToValidUTF8(name[:maxShownEnvName], "") + "…"
	}
	return name
}

// steers says why the variable name may not come from the config, or ""
// when it may.
func steers(name string) string {
	if !isEnvName(name) {
		return "not a plain variable name (letters, digits, underscores)"
	}
	upper := strings.ToUpper(name)
	if steeringEnv[upper] {
		return "it chooses the code the plugin runs, its configuration, or where it sends this process's secrets"
	}
	for _, p := range steeringEnvPrefixes {
		if strings.HasPrefix(upper, p) {
			return "it chooses the code the plugin runs, its configuration, or where it sends this process's secrets"
		}
	}
	return ""
}

// isEnvName tells whether name is [A-Za-z_][A-Za-z0-9_]*: bash exports
// functions under names that are not (BASH_FUNC_echo%%).
func isEnvName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range []byte(name) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
