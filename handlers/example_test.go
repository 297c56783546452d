package handlers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// An exec credential plugin, as a kubeconfig's exec section names it. The
// plugin here is a shell printing its ExecCredential; for EKS it would be
// Command "aws", Args "eks", "get-token", "--cluster-name", "prod". The
// vault reruns it before its credentials expire.
func ExampleExec() {
	eks := handlers.Exec(handlers.ExecConfig{
		ExecConfig: clientcmdapi.ExecConfig{
			Command: "sh",
			Args: []string{"-c", `echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",` +
				`"status":{"token":"from-the-plugin","expirationTimestamp":"2100-01-01T00:00:00Z"}}'`},
			APIVersion:      "client.authentication.k8s.io/v1",
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			InstallHint:     "install the AWS CLI: https://aws.amazon.com/cli/",
		},
		Cluster: login.ConnectionInfo{Server: "https://prod.eks.example"},
	})
	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(eks, login.ID("eks"), login.Timeout(time.Minute))
	cred, err := v.Select(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cred.Handler, cred.Info.Server, cred.Info.Expiration.Year())
	// Output: eks https://prod.eks.example 2100
}

// A projected ServiceAccount token, reread at least once a minute.
func ExampleTokenFile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "token")
	_ = os.WriteFile(path, []byte("projected-token\n"), 0o600)

	h := handlers.TokenFile(path, login.ConnectionInfo{Server: "https://kubernetes.default.svc"})
	info, err := h(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Server, time.Until(info.Expiration) <= handlers.RereadAfter)
	// Output: https://kubernetes.default.svc true
}

// A fixed credential, for tests or a token given on the command line.
func ExampleStatic() {
	h := handlers.Static(login.ConnectionInfo{Server: "https://api.example:6443", Token: "from-a-flag"})
	info, _ := h(context.Background())
	fmt.Println(info.Server, strings.Contains(fmt.Sprint(info), "from-a-flag")) // printing redacts
	// Output: https://api.example:6443 false
}
