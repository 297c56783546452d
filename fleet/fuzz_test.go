package fleet

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A provider file's content never panics the reader; what it accepts
// passes the file's checks (a name and a command each, names unique).
func FuzzParseProviders(f *testing.F) {
	f.Add([]byte(`{"providers": [{"name": "google", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin", "provideClusterInfo": true}}]}`))
	f.Add([]byte(`{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p", "args": ["x"], "env": [{"name": "A", "value": "b"}]}, "profileSourcedCLIArgsPolicy": "Append", "profileSourcedEnvVarsPolicy": "Replace"}]}`))
	f.Add([]byte("providers:\n- name: a\n"))
	f.Add([]byte(`{"providers": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		providers, err := parseProviders(data)
		if err != nil {
			return
		}
		if err := checkProviders(providers); err != nil {
			t.Errorf("accepted providers fail the checks: %v", err)
		}
	})
}

// A profile's status, whatever it holds, never panics the mapping; an
// error never quotes the profile's server, CA or extension values (they
// carry the marker "S3CR3T" here, which names and flags do not).
func FuzzAccessFor(f *testing.F) {
	f.Add(`{"accessProviders":[{"name":"p","cluster":{"server":"https://S3CR3T.example","certificate-authority-data":"UzNDUjNU","extensions":[{"name":"clusterprofiles.multicluster.x-k8s.io/exec/additional-args","extension":["--a","S3CR3T"]}]}}]}`)
	f.Add(`{"accessProviders":[{"name":"p","cluster":{"server":"http://u:S3CR3T@h","proxy-url":"http://u:S3CR3T@p"}}],"credentialProviders":[{"name":"p"}]}`)
	f.Add(`{"accessProviders":[{"name":"p","cluster":{"server":"https://h","extensions":[{"name":"clusterprofiles.multicluster.x-k8s.io/exec/additional-envs","extension":{"A":"S3CR3T"}}]}}]}`)
	f.Add(`{"accessProviders":[{"name":"aws","cluster":{"server":"https://h","extensions":[{"name":"clusterprofiles.multicluster.x-k8s.io/exec/additional-args","extension":["--reg","S3CR3T","-=S3CR3T"]}]}}]}`)
	f.Add(`{"accessProviders":[{"name":"kubelogin","cluster":{"server":"https://h","extensions":[{"name":"clusterprofiles.multicluster.x-k8s.io/exec/additional-args","extension":["-hvtS3CR3T","--","-t"]},{"name":"clusterprofiles.multicluster.x-k8s.io/exec/additional-envs","extension":{"AZURE_TENANT_ID":"S3CR3T"}}]}}]}`)
	f.Add(`{"accessProviders":[{"name":1}]}`)
	f.Add(`{"accessProviders":"S3CR3T"}`)
	providers := []AccessProvider{{Name: "p", ProfileSourcedCLIArgsPolicy: ArgsAppend, ProfileSourcedEnvVarsPolicy: EnvReplace,
		ExecConfig: &clientcmdapi.ExecConfig{Command: "plugin", APIVersion: execAPIVersionV1, Args: []string{"--region", "x"}}},
		// Plugins whose flags the fleet knows: their parsers read the
		// profile's arguments.
		{Name: "aws", ProfileSourcedCLIArgsPolicy: ArgsAppend, ProfileSourcedEnvVarsPolicy: EnvAppendIfNotExists,
			ExecConfig: &clientcmdapi.ExecConfig{Command: "aws", APIVersion: execAPIVersionV1, Args: []string{"--region", "x", "eks", "get-token"}}},
		{Name: "kubelogin", ProfileSourcedCLIArgsPolicy: ArgsAppend, ProfileSourcedEnvVarsPolicy: EnvAppendIfNotExists,
			ExecConfig: &clientcmdapi.ExecConfig{Command: "kubelogin", APIVersion: execAPIVersionV1, Args: []string{"get-token", "-t", "x", "--login"}}}}
	f.Fuzz(func(t *testing.T, status string) {
		var raw any
		if json.Unmarshal([]byte(status), &raw) != nil {
			return
		}
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": "ns", "name": "p"}, "status": raw}}
		a, err := accessFor(u, providers)
		if err != nil {
			// Flag names are quoted (a profile's flag that overrides the
			// provider's); a marker in one is the fuzzer's, not a value.
			if text := err.Error(); strings.Contains(text, "S3CR3T") && !strings.Contains(text, "provider's own arguments") && !strings.Contains(text, "it offers") {
				t.Errorf("the error quotes a value of the profile: %v", err)
			}
			return
		}
		if a.cluster == nil || !strings.HasPrefix(a.cluster.Server, "https://") {
			t.Errorf("accepted a cluster without an https server: %+v", a.cluster)
		}
	})
}

// Whatever a profile appends to whatever a provider's arguments are, for
// each plugin whose flags the fleet knows and one it does not, the reading
// of them never panics, and a refusal quotes no argument of the profile's
// that is not a flag's name.
func FuzzProfileArgs(f *testing.F) {
	f.Add(uint8(0), "token\x00-r\x00a", "-hrS3CR3T\x00--\x00-r")
	f.Add(uint8(1), "eks\x00get-token\x00--role-arn=a", "--ro\x00S3CR3T\x00-=S3CR3T\x00-1")
	f.Add(uint8(4), "get-token\x00-t", "S3CR3T\x00-vt\x00--tenant-id=S3CR3T")
	commands := []string{"aws-iam-authenticator", "aws", "argocd-k8s-auth", "gke-gcloud-auth-plugin", "kubelogin", "plugin"}
	f.Fuzz(func(t *testing.T, which uint8, own, extra string) {
		exec := clientcmdapi.ExecConfig{Command: commands[int(which)%len(commands)], Args: strings.Split(own, "\x00")}
		err := overridden(exec, strings.Split(extra, "\x00"), []clientcmdapi.ExecEnvVar{{Name: "AZURE_TENANT_ID", Value: "S3CR3T"}})
		if err == nil {
			return
		}
		// A word that carries the marker is a value; a flag's name may
		// carry it too, and be quoted.
		args := strings.Split(extra, "\x00")
		for _, a := range args {
			named := slices.ContainsFunc(args, func(f string) bool { return strings.HasPrefix(f, "-") && strings.Contains(f, a) })
			if strings.Contains(a, "S3CR3T") && !strings.HasPrefix(a, "-") && !named && strings.Contains(err.Error(), a) {
				t.Errorf("the error quotes the profile's argument %q: %v", a, err)
			}
		}
	})
}
