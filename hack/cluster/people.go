package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/authvault/authvault/testkit/manifests"
	"github.com/authvault/authvault/testkit/testcluster"
)

// The people of the walk-through: alice, in group devs, may list the
// ConfigMaps of team-a and not those of team-b; the dashboard lists them
// as her.
const (
	person      = "alice"
	personGroup = "devs"
	teamA       = "team-a"
	teamB       = "team-b"
	// dashboardUser is who the dashboard logs in as: the name RBAC reads
	// as the ServiceAccount deploy/dashboard binds.
	dashboardUser = "system:serviceaccount:" + dashNamespace + ":dashboard"
)

// teamConfigMaps are the ConfigMaps the walk-through creates in each team's
// namespace.
var teamConfigMaps = map[string][]string{teamA: {"settings", "welcome"}, teamB: {"launch-plan"}}

// setUpPeople makes the ConfigMaps, alice's RBAC and the dashboard's
// (deploy/dashboard's constrained impersonation, as written), and writes
// a kubeconfig for alice and one for the dashboard into dir, by client
// certificate. It returns their paths.
func setUpPeople(ctx context.Context, c *testcluster.Cluster, dir string) (aliceConfig, dashboardConfig string, err error) {
	cs, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		return "", "", err
	}
	for ns, names := range teamConfigMaps {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return "", "", fmt.Errorf("creating namespace %s: %w", ns, err)
		}
		for _, name := range names {
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
				return "", "", fmt.Errorf("creating ConfigMap %s/%s: %w", ns, name, err)
			}
		}
	}
	if _, err := cs.RbacV1().Roles(teamA).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{}); err != nil {
		return "", "", fmt.Errorf("creating Role %s/configmap-reader: %w", teamA, err)
	}
	if _, err := cs.RbacV1().RoleBindings(teamA).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-readers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: personGroup}},
	}, metav1.CreateOptions{}); err != nil {
		return "", "", fmt.Errorf("creating RoleBinding %s/configmap-readers: %w", teamA, err)
	}
	if err := applyImpersonation(ctx, cs); err != nil {
		return "", "", err
	}
	aliceConfig, err = writeUserKubeconfig(c, dir, envtest.User{Name: person, Groups: []string{personGroup}})
	if err != nil {
		return "", "", err
	}
	dashboardConfig, err = writeUserKubeconfig(c, dir, envtest.User{Name: dashboardUser})
	return aliceConfig, dashboardConfig, err
}

// writeUserKubeconfig writes a kubeconfig of u's, a client certificate
// of the cluster's, into dir.
func writeUserKubeconfig(c *testcluster.Cluster, dir string, u envtest.User) (string, error) {
	user, err := c.Env.AddUser(u, nil)
	if err != nil {
		return "", fmt.Errorf("making a client certificate for %s: %w", u.Name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, strings.NewReplacer(":", "-").Replace(u.Name)+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// applyImpersonation creates the ClusterRole and ClusterRoleBinding of
// deploy/dashboard/impersonate-constrained.yaml, as written: the guide's
// RBAC is the walk-through's.
func applyImpersonation(ctx context.Context, cs kubernetes.Interface) error {
	root, err := moduleDir()
	if err != nil {
		return err
	}
	docs, err := manifests.Read(filepath.Join(root, "deploy", "dashboard"))
	if err != nil {
		return err
	}
	applied := 0
	for _, d := range docs {
		if filepath.Base(d.File) != "impersonate-constrained.yaml" {
			continue
		}
		switch d.Object.GetKind() {
		case "ClusterRole":
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &role); err != nil {
				return fmt.Errorf("%s: %w", d.File, err)
			}
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var binding rbacv1.ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &binding); err != nil {
				return fmt.Errorf("%s: %w", d.File, err)
			}
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &binding, metav1.CreateOptions{})
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("creating %s %s of %s: %w", d.Object.GetKind(), d.Object.GetName(), d.File, err)
		}
		applied++
	}
	if applied != 2 {
		return fmt.Errorf("deploy/dashboard/impersonate-constrained.yaml: %d objects applied, want a ClusterRole and its binding", applied)
	}
	return nil
}

// moduleDir is the directory of the module the program runs in: deploy/
// is read from it, as its packages are built from it.
func moduleDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not run in authvault's module (go env GOMOD says %q): run make dashboard from the repository", mod)
	}
	return filepath.Dir(mod), nil
}
