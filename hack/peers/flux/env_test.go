package flux_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/testkit/hubtrust"
	"github.com/authvault/authvault/testkit/testcluster"
)

// The hub's namespaces and ServiceAccounts the cases name.
const (
	operatorNS = "flux-system"          // the operator's own namespace
	operatorSA = "kustomize-controller" // the operator's own ServiceAccount
	tenantNS   = "team-a"               // a tenant's namespace
	deployer   = "deployer"             // a tenant's ServiceAccount the member grants
	remote     = "remote"               // the lockdown's default ServiceAccount, granted too
	stranger   = "tenant"               // a ServiceAccount the member grants nothing
)

// env is the hub and the member every test and benchmark of the module
// shares.
type env struct {
	hub    *testcluster.Cluster
	member *testcluster.Member
	// door is the member's front door, and addr its URL: the member's
	// audience is addr, so that Flux's default audience for generic (the
	// address key) is one the member takes.
	door *door
	addr string
	ca   string // the member's CA, PEM, as a ConfigMap's ca.crt holds it

	hubAdmin, memberAdmin kubernetes.Interface
	// podToken is a token of the operator's ServiceAccount, as its pod has
	// one mounted: what Flux reads for the controller's own identity.
	podToken []byte
}

// The clouds' stand-ins and their network, for the whole module
// (TestMain opens and closes them).
var (
	cloudStandIn = newClouds()
	cloudNetwork *cloudNet
)

var shared struct {
	once sync.Once
	env  *env
	err  error
}

// setup returns the shared hub and member, starting them on first use.
func setup(t testing.TB) *env {
	t.Helper()
	shared.once.Do(func() { shared.env, shared.err = start() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.env
}

// teardown stops what setup started, if anything.
func teardown() error {
	if shared.env == nil {
		return nil
	}
	return shared.env.stop()
}

func start() (_ *env, err error) {
	e := &env{}
	if e.door, err = openDoor(); err != nil {
		return nil, err
	}
	e.addr = "https://" + e.door.Addr()
	defer func() {
		if err != nil {
			err = errors.Join(err, e.stop())
		}
	}()
	if e.hub, err = testcluster.StartWith(testcluster.Options{IssuerDiscovery: true}); err != nil {
		return nil, err
	}
	if e.member, err = e.hub.StartMember(e.addr); err != nil {
		return nil, err
	}
	u, err := url.Parse(e.member.Server)
	if err != nil {
		return nil, err
	}
	e.door.open(u.Host)
	e.ca = string(e.member.CAData)
	e.hubAdmin = kubernetes.NewForConfigOrDie(e.hub.Admin)
	// The hub is the member of the cloud cases too: its authenticator
	// asks the clouds' stand-ins about their tokens, and they trust its
	// issuer.
	issuer, err := e.hub.ServiceAccountIssuer(context.Background())
	if err != nil {
		return nil, err
	}
	cloudStandIn.hub.Store(&hubtrust.Trust{Issuer: issuer, CAData: e.hub.CAData})
	e.hub.Issuer.SetAccept(cloudStandIn.accept)
	e.memberAdmin = kubernetes.NewForConfigOrDie(e.member.Admin)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	accounts := map[string][]string{
		operatorNS: {operatorSA},
		tenantNS:   {deployer, remote, stranger},
	}
	for ns, names := range accounts {
		if _, err := e.hubAdmin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		for _, name := range names {
			if _, err := e.hubAdmin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
			if name == stranger {
				continue
			}
			read := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}
			if err := e.member.Allow(ctx, ns, name, read); err != nil {
				return nil, err
			}
		}
	}
	tr, err := e.hubAdmin.CoreV1().ServiceAccounts(operatorNS).CreateToken(ctx, operatorSA, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("the operator's pod token: %w", err)
	}
	e.podToken = []byte(tr.Status.Token + "\n")
	return e, nil
}

// stop stops what start started.
func (e *env) stop() error {
	e.door.Close()
	var errs []error
	if e.member != nil {
		errs = append(errs, e.member.Stop())
	}
	if e.hub != nil {
		errs = append(errs, e.hub.Stop())
	}
	return errors.Join(errs...)
}
