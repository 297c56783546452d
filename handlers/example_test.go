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

// An EKS cluster's credentials from the AWS CLI, refreshed by the vault
// before they expire.
func ExampleExec() {
	v := vault.New(vault.Options{})
	defer v.Close()
	v.OnLogin(handlers.Exec(handlers.ExecConfig{
		ExecConfig: clientcmdapi.ExecConfig{
			Command:         "aws",
			Args:            []string{"eks", "get-token", "--cluster-name", "prod"},
			APIVersion:      "client.authentication.k8s.io/v1beta1",
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			InstallHint:     "install the AWS CLI: https://aws.amazon.com/cli/",
		},
		Cluster: login.ConnectionInfo{Server: "https://prod.eks.example", CAPath: "/etc/prod-ca.crt"},
	}), login.ID("eks"), login.Timeout(time.Minute))
	fmt.Println("registered")
	// Output: registered
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
