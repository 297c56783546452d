package flux_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/auth"
	"github.com/fluxcd/pkg/auth/generic"
	"github.com/fluxcd/pkg/auth/utils"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// caseLabel marks a case's ConfigMap, so that the fleet of that case
// watches it alone.
const caseLabel = "authvault.test/case"

// configMap is a Flux ConfigMap on the hub, and the settings around it
// that each side has its own way to say.
type configMap struct {
	ns, name string
	data     map[string]string
	// pod: Flux takes the controller's own identity (no serviceAccountName
	// and no default) from its pod's token file, which is stood in for
	// here as Flux's own tests stand in for it (generic.Implementation).
	pod bool
	// lockdown is the default ServiceAccount of a ConfigMap that names
	// none: Flux's --default-kubeconfig-service-account, our
	// FluxOptions.ServiceAccount.
	lockdown string
	// gateOff turns Flux's ObjectLevelWorkloadIdentity gate off (ours has
	// none).
	gateOff bool
	// fluxOptions are more options for Flux's utils.GetRESTConfig: the
	// clouds' proxy, an STS endpoint.
	fluxOptions []auth.Option
}

// reading is what one side made of a ConfigMap.
type reading struct {
	err    error  // the first failure: refused, no config, or a request to the member
	user   string // the user the member authenticated, if it did
	listed int    // the member's namespaces listed
	minted string // the TokenRequests it made on the hub (mints.distinct)
}

// put creates cm on the hub until the test ends.
func put(t testing.TB, e *env, cm configMap) {
	t.Helper()
	ctx := testwait.Context(t)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.ns, Name: cm.name, Labels: map[string]string{caseLabel: cm.name}}, Data: cm.data}
	if _, err := e.hubAdmin.CoreV1().ConfigMaps(cm.ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.hubAdmin.CoreV1().ConfigMaps(cm.ns).Delete(context.Background(), cm.name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
}

// viaFlux reads cm as a Flux controller does: utils.GetRESTConfig with a
// controller-runtime client of the hub, then uses the config.
func viaFlux(t testing.TB, e *env, cm configMap, m *mints) reading {
	t.Helper()
	ctx := testwait.Context(t)
	hub, err := client.New(m.config(e.hub.Admin), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.lockdown != "" {
		auth.SetDefaultKubeConfigServiceAccount(cm.lockdown)
		defer auth.SetDefaultKubeConfigServiceAccount("")
	}
	if cm.gateOff {
		auth.DisableObjectLevelWorkloadIdentity()
		defer auth.EnableObjectLevelWorkloadIdentity()
	}
	var cfg *rest.Config
	if cm.pod {
		cfg, err = fluxController(ctx, e, hub, cm)
	} else {
		ref := meta.KubeConfigReference{ConfigMapRef: &meta.LocalObjectReference{Name: cm.name}}
		cfg, err = utils.GetRESTConfig(ctx, ref, cm.ns, hub, cm.fluxOptions...)
	}
	r := use(ctx, cfg, err)
	r.minted = m.distinct()
	return r
}

// fluxController is utils.GetRESTConfig for a generic ConfigMap with an
// address and a ca.crt and no other key, with the pod's token file stood
// in for: the options it passes, to auth.GetRESTConfig with the generic
// provider reading e.podToken. Its config carries the token itself,
// where utils' asks for one at every request.
func fluxController(ctx context.Context, e *env, hub client.Client, cm configMap) (*rest.Config, error) {
	for k := range cm.data {
		if k != meta.KubeConfigKeyProvider && k != meta.KubeConfigKeyAddress && k != meta.KubeConfigKeyCACert {
			return nil, fmt.Errorf("fluxController serves the keys provider, address and ca.crt, not %s", k)
		}
	}
	rc, err := auth.GetRESTConfig(ctx, generic.Provider{Implementation: podFile(e.podToken)},
		auth.WithClusterAddress(cm.data[meta.KubeConfigKeyAddress]),
		auth.WithCAData(cm.data[meta.KubeConfigKeyCACert]),
		auth.WithClient(hub),
		auth.WithServiceAccountNamespace(cm.ns))
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: rc.Host, BearerToken: rc.BearerToken, TLSClientConfig: rest.TLSClientConfig{CAData: rc.CAData}}, nil
}

// podFile is a pod's mounted ServiceAccount token, for Flux's generic
// provider.
type podFile []byte

func (p podFile) ReadFile(name string) ([]byte, error) {
	if name != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		return nil, fmt.Errorf("podFile: %s is not the pod's token file", name)
	}
	return p, nil
}

// viaOurs reads cm as a fleet's WatchFlux does, then uses the cluster's
// config.
func viaOurs(t testing.TB, e *env, cm configMap, m *mints, opts fleet.FluxOptions) reading {
	t.Helper()
	var logs testlog.Buffer
	f := fleet.New(fleet.Options{Logger: logs.Logger(0)})
	defer f.Close()
	watchCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts.Config = m.config(e.hub.Admin)
	opts.Namespace = cm.ns
	opts.LabelSelector = caseLabel + "=" + cm.name
	if opts.Operator == "" {
		opts.Operator = operatorNS + "/" + operatorSA
	}
	if opts.ServiceAccount == "" {
		opts.ServiceAccount = cm.lockdown
	}
	// One try a login, soon retried: a case waits for the first outcome.
	opts.Login = append(opts.Login, login.Retries(0), login.Backoff(50*time.Millisecond, time.Second))
	go func() { done <- f.WatchFlux(watchCtx, opts) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	name := cm.ns + "/" + cm.name
	var refused string
	testwait.For(t, "the fleet to take or refuse "+name, func() bool {
		refused = refusal(logs.String(), name)
		return refused != "" || slices.Contains(f.Names(), name)
	})
	if refused != "" {
		return reading{err: errors.New(refused), minted: m.distinct()}
	}
	ctx := testwait.Context(t)
	cfg, err := f.RESTConfig(ctx, name)
	r := use(ctx, cfg, err)
	r.minted = m.distinct()
	return r
}

// refusal is the line of logs that says the ConfigMap name was not added
// to the fleet, or "".
func refusal(logs, name string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"configMap"="`+name+`"`) && strings.Contains(line, "not added to the fleet") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// use asks the member who it is with cfg, then lists its namespaces.
func use(ctx context.Context, cfg *rest.Config, err error) reading {
	if err != nil {
		return reading{err: err}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return reading{err: err}
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return reading{err: err}
	}
	r := reading{user: review.Status.UserInfo.Username}
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		r.err = err
		return r
	}
	r.listed = len(list.Items)
	return r
}
