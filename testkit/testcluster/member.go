package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// discoveryAuthentication is a hub's AuthenticationConfiguration: no jwt
// issuer of its own, and anonymous callers let in on the two discovery
// paths and the health checks only (AnonymousAuthConfigurableEndpoints, GA
// since 1.34; kubeadm's clusters let /livez, /readyz and /healthz in, and
// envtest waits on /healthz as an anonymous caller).
const discoveryAuthentication = `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt: []
anonymous:
  enabled: true
  conditions:
  - path: /.well-known/openid-configuration
  - path: /openid/v1/jwks
  - path: /livez
  - path: /readyz
  - path: /healthz
`

// discoveryBinding lets anonymous callers read the issuer discovery: the
// bootstrap binding of system:service-account-issuer-discovery names only
// the group system:serviceaccounts.
const discoveryBinding = "authvault-oidc-discovery-unauthenticated"

func (c *Cluster) bindDiscovery() error {
	cs, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: discoveryBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:unauthenticated"}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("testcluster: binding the issuer discovery for anonymous callers: %w", err)
	}
	return nil
}

// ServiceAccountIssuer is the ServiceAccount issuer, as the discovery document
// names it: the iss of every token the API server signs.
func (c *Cluster) ServiceAccountIssuer(ctx context.Context) (string, error) {
	cs, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		return "", err
	}
	body, err := cs.RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("testcluster: the hub's issuer discovery: %w", err)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Issuer == "" {
		return "", fmt.Errorf("testcluster: the hub's issuer discovery names no issuer: %q", body)
	}
	return doc.Issuer, nil
}

// MemberUserPrefix is what a Member puts before a hub token's subject to
// name its user: hub:system:serviceaccount:<namespace>:<name>.
const MemberUserPrefix = "hub:"

// Member is a kube-apiserver, with its own etcd, that trusts a hub's
// ServiceAccount tokens minted for its Audience: its
// --authentication-config has a jwt authenticator whose issuer is the
// hub's, with the hub's CA.
type Member struct {
	Env      *envtest.Environment
	Admin    *rest.Config // envtest's own admin, by client certificate
	Server   string       // the API server's URL
	CAData   []byte       // the CA of its serving certificate
	Audience string

	dir, config string
}

// StartMember starts a member that trusts c's ServiceAccount tokens for
// audience. c must have been started with Options.IssuerDiscovery.
func (c *Cluster) StartMember(audience string) (*Member, error) {
	if audience == "" {
		return nil, errors.New("testcluster: a member needs an audience")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	issuer, err := c.ServiceAccountIssuer(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "authvault-member-")
	if err != nil {
		return nil, err
	}
	m := &Member{Audience: audience, dir: dir, config: filepath.Join(dir, "authentication-config.yaml")}
	if err := os.WriteFile(m.config, []byte(memberAuthentication(issuer, audience, c.CAData)), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	m.Env = &envtest.Environment{ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: time.Minute}
	api := m.Env.ControlPlane.GetAPIServer()
	api.Configure().Set("authentication-config", m.config)
	if m.Admin, err = m.Env.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testcluster: starting the member: %w", err)
	}
	m.Server, m.CAData = m.Admin.Host, m.Admin.CAData
	if u, _, err := rest.DefaultServerUrlFor(m.Admin); err == nil {
		m.Server = u.String()
	}
	return m, nil
}

// memberAuthentication is a member's AuthenticationConfiguration: the
// hub's issuer for audience, its subject as the user (prefixed), its
// namespace's group and its ServiceAccount's uid. The expressions are
// ones checked against a real token: some CEL compiles at the API
// server's start and fails on every token.
func memberAuthentication(issuer, audience string, hubCA []byte) string {
	ca := "      " + strings.ReplaceAll(strings.TrimSpace(string(hubCA)), "\n", "\n      ")
	return fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: %q
    audiences:
    - %q
    certificateAuthority: |
%s
  claimValidationRules:
  - expression: "claims.sub.startsWith('system:serviceaccount:')"
    message: not a hub service-account token
  claimMappings:
    username:
      claim: sub
      prefix: %q
    groups:
      expression: "['hub:system:serviceaccounts', 'hub:system:serviceaccounts:' + claims['kubernetes.io'].namespace]"
    uid:
      expression: "claims['kubernetes.io'].serviceaccount.uid"
  userValidationRules:
  - expression: "user.username.startsWith('hub:')"
    message: hub users must carry the hub prefix
`, issuer, audience, ca, MemberUserPrefix)
}

// User is the member's name for the hub's ServiceAccount namespace/name.
func (m *Member) User(namespace, name string) string {
	return MemberUserPrefix + "system:serviceaccount:" + namespace + ":" + name
}

// ReloadAuthentication rewrites the member's authentication config with
// the same content and a new comment: the API server reloads it, fetching
// the hub's discovery and keys again, in about ten seconds.
func (m *Member) ReloadAuthentication() error {
	data, err := os.ReadFile(m.config)
	if err != nil {
		return err
	}
	data = append(data, fmt.Sprintf("# reloaded %s\n", time.Now().Format(time.RFC3339Nano))...)
	return os.WriteFile(m.config, data, 0o600)
}

// Stop stops the member's control plane.
func (m *Member) Stop() error {
	err := m.Env.Stop()
	os.RemoveAll(m.dir)
	return err
}

// keysFetchMetric is the member's gauge of when its jwt authenticator
// last fetched the issuer's keys, by result.
const keysFetchMetric = "apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds"

// KeysFetched is when the member last fetched the hub's keys with
// success (its metrics say), zero before its first fetch.
func (m *Member) KeysFetched(ctx context.Context) (time.Time, error) {
	cs, err := kubernetes.NewForConfig(m.Admin)
	if err != nil {
		return time.Time{}, err
	}
	body, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("testcluster: the member's metrics: %w", err)
	}
	var last float64
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, keysFetchMetric+"{") || !strings.Contains(line, `result="success"`) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil && v > last {
			last = v
		}
	}
	if last == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, int64(last*float64(time.Second))), nil
}

// Allow grants the hub's ServiceAccount namespace/name rules on the
// member: a ClusterRole and a ClusterRoleBinding to its User, both named
// hub-<namespace>-<name>.
func (m *Member) Allow(ctx context.Context, namespace, name string, rules ...rbacv1.PolicyRule) error {
	cs, err := kubernetes.NewForConfig(m.Admin)
	if err != nil {
		return err
	}
	role := "hub-" + namespace + "-" + name
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("testcluster: the member's ClusterRole %s: %w", role, err)
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: m.User(namespace, name)}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("testcluster: the member's ClusterRoleBinding %s: %w", role, err)
	}
	return nil
}
