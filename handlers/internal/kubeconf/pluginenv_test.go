package kubeconf

import (
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// What kubeconfigs in the wild give their plugins (a profile, a region,
// the STS endpoint style, a tenant, client and login method, kubelogin's
// cache directory, an HTTPS proxy) passes; what steers a plugin does not,
// in any case.
func TestSteers(t *testing.T) {
	for name, want := range map[string]bool{
		"AWS_PROFILE": false, "AWS_REGION": false, "AWS_DEFAULT_REGION": false, "AWS_STS_REGIONAL_ENDPOINTS": false,
		"AWS_ROLE_ARN": false, "AWS_ROLE_SESSION_NAME": false, "AWS_SDK_LOAD_CONFIG": false,
		"AZURE_CLIENT_ID": false, "AZURE_TENANT_ID": false, "AZURE_ENVIRONMENT": false,
		"AAD_LOGIN_METHOD": false, "AAD_SERVICE_PRINCIPAL_CLIENT_ID": false, "KUBECACHEDIR": false,
		"USE_GKE_GCLOUD_AUTH_PLUGIN": false, "HTTPS_PROXY": false, "https_proxy": false, "NO_PROXY": false, "_X": false,
		"PATH": true, "Path": true, "LD_LIBRARY_PATH": true, "DYLD_INSERT_LIBRARIES": true, "PYTHONPATH": true,
		"PERL5OPT": true, "RUBYOPT": true, "NODE_PATH": true, "GCONV_PATH": true, "KUBECONFIG": true,
		"GIT_SSH_COMMAND": true, "CORECLR_PROFILER_PATH": true, "HOME": true, "A-B": true, "A=B": true,
		"AWS_ENDPOINT_URL_STS": true, "aws_endpoint_url_sts": true, "AWS_WEB_IDENTITY_TOKEN_FILE": true,
		"CLOUDSDK_CONFIG": true, "CLOUDSDK_PYTHON_ARGS": true, "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": true,
		"HTTP_PROXY": true, "all_proxy": true, "GODEBUG": true, "TMPDIR": true, "RES_OPTIONS": true,
		"PATH\u200b": true, "ĸ": true, "": true,
	} {
		if got := steers(name) != ""; got != want {
			t.Errorf("steers(%q) = %v, want %v", name, got, want)
		}
	}
}

// Only AllowAll (and the zero policy, client-go's default) passes any env.
func TestPluginEnvAllowedByPolicy(t *testing.T) {
	env := []clientcmdapi.ExecEnvVar{{Name: "AWS_PROFILE", Value: "prod"}, {Name: "LD_PRELOAD", Value: "/tmp/x.so"}}
	for _, tc := range []struct {
		policy clientcmdapi.PolicyType
		ok     bool
	}{
		{"", true}, {clientcmdapi.PluginPolicyAllowAll, true},
		{clientcmdapi.PluginPolicyAllowlist, false}, {clientcmdapi.PluginPolicyDenyAll, false}, {"Unknown", false},
	} {
		err := PluginEnvAllowed(clientcmdapi.PluginPolicy{PolicyType: tc.policy}, env)
		if got := err == nil; got != tc.ok {
			t.Errorf("policy %q: %v, want allowed %v", tc.policy, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), `env "LD_PRELOAD"`) || strings.Contains(err.Error(), "/tmp/x.so")) {
			t.Errorf("policy %q: error = %v, want it to name LD_PRELOAD and not its value", tc.policy, err)
		}
	}
}
