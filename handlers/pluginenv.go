package handlers

import (
	"fmt"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// An Allowlist says which programs may run; it cannot say what they do.
// A plugin's environment decides much of that: a bash plugin runs the
// functions BASH_FUNC_name%% defines and the file (or the command
// substitution) BASH_ENV names, the dynamic loader preloads what LD_PRELOAD
// names, Python, Node, Perl and Ruby take code from their *OPTIONS and path
// variables, gcloud runs the interpreter CLOUDSDK_PYTHON names, PATH picks
// every program the plugin starts. So under any policy but AllowAll, the
// exec env of the config (a kubeconfig's, a Secret's: written by someone
// other than this process) may not set such a variable. The plugin still
// inherits this process's own environment, which the operator's author
// chose: a plugin that needs PATH or PYTHONPATH gets it from there.

// steeringEnv are the variables, upper-cased, that load code or choose the
// programs a plugin runs.
var steeringEnv = map[string]bool{
	"PATH": true, "IFS": true, "ENV": true, "BASH_ENV": true, "SHELLOPTS": true, "BASHOPTS": true,
	"PS0": true, "PS1": true, "PS2": true, "PS4": true, "PROMPT_COMMAND": true, "CDPATH": true,
	"GLOBIGNORE": true, "ZDOTDIR": true, "BASH_XTRACEFD": true,
	"GCONV_PATH": true, "LOCPATH": true, "NLSPATH": true, "GLIBC_TUNABLES": true, "HOSTALIASES": true,
	"OPENSSL_CONF": true, "OPENSSL_ENGINES": true, "OPENSSL_MODULES": true,
	"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true, "CLASSPATH": true,
	"PHPRC": true, "PHP_INI_SCAN_DIR": true,
	"BROWSER": true, "EDITOR": true, "VISUAL": true, "PAGER": true, "LESSOPEN": true, "LESSCLOSE": true,
	// Files a plugin reads its own configuration from, which can name a
	// command to run (AWS's credential_process, a kubeconfig's exec, a
	// Google external account's executable).
	"KUBECONFIG": true, "AWS_CONFIG_FILE": true, "AWS_SHARED_CREDENTIALS_FILE": true,
	"CLOUDSDK_CONFIG": true, "GOOGLE_APPLICATION_CREDENTIALS": true,
	"GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES": true, "AZURE_CONFIG_DIR": true,
	"XDG_CONFIG_HOME": true, "XDG_CONFIG_DIRS": true, "HOME": true,
}

// steeringEnvPrefixes are families of such variables.
var steeringEnvPrefixes = []string{
	"LD_", "DYLD_", "BASH_FUNC_", "PYTHON", "PERL", "RUBY", "GEM_", "BUNDLE_", "NODE_", "NPM_CONFIG_",
	"LUA_", "TCL", "GIT_", "DOTNET_", "COMPLUS_", "CORECLR_", "CLOUDSDK_PYTHON", "MALLOC_",
}

// envAllowed returns nil when policy lets env reach the plugin: always
// under AllowAll, and under an Allowlist only names that are plain
// identifiers, do not steer the plugin (steeringEnv), and values without
// line breaks or NUL (which would let one variable forge lines of a file
// the plugin reads, /proc/self/environ as an ini file). The error names the
// variable, never its value.
func envAllowed(policy PluginPolicy, command string, env []clientcmdapi.ExecEnvVar) error {
	if policy.PolicyType == "" || policy.PolicyType == clientcmdapi.PluginPolicyAllowAll {
		return nil
	}
	for _, e := range env {
		why := steers(e.Name)
		if why == "" && strings.ContainsAny(e.Value, "\x00\r\n") {
			why = "its value holds a line break or NUL"
		}
		if why != "" {
			return login.Permanent(fmt.Errorf("handlers: exec plugin %q: env %q is not allowed under plugin policy %s: %s; set it in this process's own environment if the plugin needs it",
				command, e.Name, policy.PolicyType, why))
		}
	}
	return nil
}

// steers says why the variable name may not come from the config, or ""
// when it may.
func steers(name string) string {
	if !isEnvName(name) {
		return "not a plain variable name (letters, digits, underscores)"
	}
	upper := strings.ToUpper(name)
	if steeringEnv[upper] {
		return "it chooses the code or the configuration the plugin runs"
	}
	for _, p := range steeringEnvPrefixes {
		if strings.HasPrefix(upper, p) {
			return "it chooses the code or the configuration the plugin runs"
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
