package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A provider file as KEP-5339 and the reference library's examples lay it
// out reads as it is; each kind of mistake is an error that names the file
// and what is wrong.
func TestReadProviderFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.json", `{"providers": [
	  {"name": "google", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin", "provideClusterInfo": true}},
	  {"name": "secretreader", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/plugins/secretreader",
	   "args": ["--x"], "env": [{"name": "A", "value": "b"}]}, "profileSourcedCLIArgsPolicy": "Append", "profileSourcedEnvVarsPolicy": "Replace"}]}`)
	providers, err := ReadProviderFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(providers) != 2 || providers[0].Name != "google" || !providers[0].ExecConfig.ProvideClusterInfo ||
		providers[1].ExecConfig.Command != "/plugins/secretreader" || providers[1].ExecConfig.Env[0].Value != "b" ||
		providers[1].ProfileSourcedCLIArgsPolicy != ArgsAppend || providers[1].ProfileSourcedEnvVarsPolicy != EnvReplace {
		t.Errorf("read %+v", providers)
	}

	for _, tt := range []struct{ name, content, want string }{
		{"typo.json", `{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p", "provideClusterInfos": true}}]}`, `unknown field "provideClusterInfos"`},
		{"none.json", `{"providers": []}`, "no providers"},
		{"noname.json", `{"providers": [{"execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p"}}]}`, "provider 0 has no name"},
		{"twice.json", `{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p"}}, {"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "q"}}]}`, `two providers are named "a"`},
		{"nocommand.json", `{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1"}}]}`, `provider "a" has no execConfig with a command`},
		{"version.json", `{"providers": [{"name": "a", "execConfig": {"apiVersion": "v1", "command": "p"}}]}`, `apiVersion "v1" is neither`},
		{"args.json", `{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p"}, "profileSourcedCLIArgsPolicy": "append"}]}`, `profileSourcedCLIArgsPolicy "append"`},
		{"env.json", `{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p"}, "profileSourcedEnvVarsPolicy": "Merge"}]}`, `profileSourcedEnvVarsPolicy "Merge"`},
		{"two.json", `{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p"}}]} {}`, "more than one JSON value"},
		{"yaml.json", "providers:\n- name: a\n", "is not JSON"},
	} {
		_, err := ReadProviderFile(write(tt.name, tt.content))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.name) {
			t.Errorf("%s: %v, want an error naming the file and %q", tt.name, err, tt.want)
		}
	}
	if _, err := ReadProviderFile(dir); err == nil || !strings.Contains(err.Error(), "provider file") {
		t.Errorf("a directory: %v, want an error", err)
	}
	if _, err := ReadProviderFile(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file: no error")
	}
}
