package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/testkit/testcluster"
)

// The pair make cluster-pair starts: the hub's ServiceAccount that the
// member trusts, and the member's audience (docs/federation.md).
const (
	memberNamespace      = "fleet-system"
	memberServiceAccount = "fleet-operator"
	memberAudience       = "member-1"
)

// startMember starts a member that trusts c's ServiceAccount tokens for
// memberAudience, makes the hub's ServiceAccount and the member's RBAC for
// it (list namespaces), and writes the member's address and CA into dir:
// all the fleet needs.
func startMember(ctx context.Context, c *testcluster.Cluster, dir string) (*testcluster.Member, error) {
	hub, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		return nil, err
	}
	if _, err := hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: memberNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("the hub's namespace %s: %w", memberNamespace, err)
	}
	if _, err := hub.CoreV1().ServiceAccounts(memberNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: memberServiceAccount}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("the hub's ServiceAccount: %w", err)
	}
	m, err := c.StartMember(memberAudience)
	if err != nil {
		return nil, err
	}
	err = m.Allow(ctx, memberNamespace, memberServiceAccount,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}})
	if err == nil {
		err = writeFile(dir, "member-server", []byte(strings.TrimSuffix(m.Server, "/")+"\n"))
	}
	if err == nil {
		err = writeFile(dir, "member-ca.crt", m.CAData)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("the member's RBAC and files: %w", err), m.Stop())
	}
	return m, nil
}

// printPair says what the pair is and how to reach the member.
func printPair(out io.Writer, c *testcluster.Cluster, m *testcluster.Member, dir, kubeconfig string) {
	fmt.Fprintf(out, `
The hub is up at %s (kubeconfig %s), and a member at %s whose
API server trusts the hub's ServiceAccount tokens for audience %s: it takes
%s/%s of the hub as the user %s, which may list namespaces.
Nothing of the member's is stored but its address (%s) and CA (%s).

Reach it from the hub, in another terminal:

    go run ./examples/federation --kubeconfig %s \
        --member-server "$(cat %s)" --member-ca %s

docs/federation.md explains each piece. Ctrl-C stops both.
`, strings.TrimSuffix(c.Server, "/"), kubeconfig, strings.TrimSuffix(m.Server, "/"), memberAudience,
		memberNamespace, memberServiceAccount, m.User(memberNamespace, memberServiceAccount),
		filepath.Join(dir, "member-server"), filepath.Join(dir, "member-ca.crt"),
		kubeconfig, filepath.Join(dir, "member-server"), filepath.Join(dir, "member-ca.crt"))
}

// memberStart bounds the member's start, its RBAC and its files.
const memberStart = 3 * time.Minute
