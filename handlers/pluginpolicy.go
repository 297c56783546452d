package handlers

import (
	"fmt"
	"os/exec"
	"strings"

	clientexec "k8s.io/client-go/plugin/pkg/client/auth/exec"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// PluginPolicy says which exec plugins may run: client-go's own type
// (ExecConfig.PluginPolicy, which Exec honours as client-go's exec
// authenticator does). The zero value allows every plugin, as client-go's
// does; kubeconfigs someone else wrote (a Secret) deserve DenyAll or an
// Allowlist.
type PluginPolicy = clientcmdapi.PluginPolicy

// Plugin policies.
var (
	// AllowAll runs any plugin: client-go's default, and a kubeconfig
	// file's.
	AllowAll = PluginPolicy{PolicyType: clientcmdapi.PluginPolicyAllowAll}
	// DenyAll runs none.
	DenyAll = PluginPolicy{PolicyType: clientcmdapi.PluginPolicyDenyAll}
)

// Allowlist runs only the commands named, compared after both are resolved
// through $PATH.
func Allowlist(commands ...string) PluginPolicy {
	p := PluginPolicy{PolicyType: clientcmdapi.PluginPolicyAllowlist, Allowlist: []clientcmdapi.AllowlistEntry{}}
	for _, c := range commands {
		p.Allowlist = append(p.Allowlist, allowlistEntry(c))
	}
	return p
}

// policyAllows returns nil when policy lets command run, and a permanent
// error naming the command and the policy when not.
func policyAllows(policy PluginPolicy, command string) error {
	if policy.PolicyType == clientcmdapi.PluginPolicyAllowlist {
		if err := allowlistReadable(command); err != nil {
			return err
		}
	}
	if err := clientexec.ValidatePluginPolicy(policy); err != nil {
		return login.Permanent(fmt.Errorf("handlers: exec plugin %q: %w", command, err))
	}
	switch policy.PolicyType {
	case "", clientcmdapi.PluginPolicyAllowAll:
		return nil
	case clientcmdapi.PluginPolicyDenyAll:
		return login.Permanent(fmt.Errorf("handlers: exec plugin %q is not allowed: plugin policy %s", command, policy.PolicyType))
	}
	// The same text runs the same file; a cleaned one need not: "./sh"
	// cleans to "sh", and runs the working directory's sh, not $PATH's.
	for _, entry := range policy.Allowlist {
		if entryCommand(entry) == command && !strings.HasPrefix(command, nativePrefix) {
			return nil
		}
	}
	resolved, err := exec.LookPath(command)
	if err != nil {
		return login.Permanent(fmt.Errorf("handlers: exec plugin %q is not allowed: plugin policy %s: it cannot be resolved: %w", command, policy.PolicyType, err))
	}
	for _, entry := range policy.Allowlist {
		if allowed, err := exec.LookPath(entryCommand(entry)); err == nil && allowed == resolved {
			return nil
		}
	}
	return login.Permanent(fmt.Errorf("handlers: exec plugin %q is not allowed: plugin policy %s does not list it", command, policy.PolicyType))
}
