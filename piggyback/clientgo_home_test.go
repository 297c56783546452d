package piggyback

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"testing"
)

// unsetHome unsets HOME for the test and makes the system's user database
// say that the user's home is home.
func unsetHome(t *testing.T, home string) {
	t.Helper()
	t.Setenv("HOME", "") // restores HOME after the test
	if err := os.Unsetenv("HOME"); err != nil {
		t.Fatal(err)
	}
	old := currentUser
	currentUser = func() (*user.User, error) { return &user.User{HomeDir: home}, nil }
	t.Cleanup(func() { currentUser = old })
}

func writeKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
`, server))
}

// Without HOME, controller-runtime's config.GetConfig appends the user's
// ~/.kube/config from the system to client-go's loading rules, also when
// $KUBECONFIG is set: its files come first, the home file fills in. ClientGo
// does the same.
func TestClientGoWithoutHOMEReadsTheUsersHomeBeneathKUBECONFIG(t *testing.T) {
	isolate(t)
	userHome := t.TempDir()
	unsetHome(t, userHome)
	writeKubeconfig(t, filepath.Join(userHome, ".kube", "config"), "https://user-home.example")

	// $KUBECONFIG names a file that does not exist: the home file decides.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	info, err := ClientGo(context.Background())
	if err != nil || info == nil || info.Server != "https://user-home.example" {
		t.Errorf("ClientGo() with a missing $KUBECONFIG and no HOME = %v, %v; want the user's home kubeconfig, as config.GetConfig", info, err)
	}

	// $KUBECONFIG's own file wins over the home file.
	env := filepath.Join(t.TempDir(), "env")
	writeKubeconfig(t, env, "https://env.example")
	t.Setenv("KUBECONFIG", env)
	info, err = ClientGo(context.Background())
	if err != nil || info == nil || info.Server != "https://env.example" {
		t.Errorf("ClientGo() with $KUBECONFIG and no HOME = %v, %v; want $KUBECONFIG's server", info, err)
	}
}

// Without HOME and without $KUBECONFIG, the home kubeconfig is the user's
// from the system.
func TestClientGoWithoutHOMEFindsTheUsersHome(t *testing.T) {
	isolate(t)
	userHome := t.TempDir()
	unsetHome(t, userHome)
	writeKubeconfig(t, filepath.Join(userHome, ".kube", "config"), "https://user-home.example")
	info, err := ClientGo(context.Background())
	if err != nil || info == nil || info.Server != "https://user-home.example" {
		t.Errorf("ClientGo() without HOME = %v, %v; want the user's home kubeconfig", info, err)
	}
}
