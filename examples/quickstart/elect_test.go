package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// logs is what every replica of these tests logged, as the quickstart
// logs it (controller-runtime's zap, JSON).
var logs testlog.Writer

var (
	apiOnce sync.Once
	api     *testcluster.Cluster
	apiErr  error
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(&logs)))
	code := m.Run()
	if api != nil {
		if err := api.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the API server:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// apiServer is a real kube-apiserver and etcd, started once.
func apiServer(t *testing.T) (*testcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	apiOnce.Do(func() { api, apiErr = testcluster.Start() })
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	cs, err := kubernetes.NewForConfig(api.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return api, cs
}

// group is the replicas of one test, which share a lease; leading counts
// their reconcilers running at once, most the highest count seen.
type group struct {
	t             *testing.T
	lease         string
	cs            kubernetes.Interface
	leading, most atomic.Int32
}

// newGroup is a group whose lease is named after lease, and new to this
// run (-count=2 would otherwise find the last run's).
func newGroup(t *testing.T, lease string) *group {
	_, cs := apiServer(t)
	return &group{t: t, lease: fmt.Sprintf("%s-%d", lease, time.Now().UnixNano()), cs: cs}
}

// replica is one process's runElected, with a reconciler that stops when
// told to (its ctx ends) unless stuck, until unstick is closed.
type replica struct {
	stop      context.CancelFunc
	done      chan error
	reconcile chan struct{} // closed once its reconciler runs
	ended     chan struct{} // closed once its reconciler has returned
	unstick   chan struct{}
}

type replicaOptions struct {
	stuck          bool          // the reconciler ignores its ctx
	gracefulStop   time.Duration // the manager's GracefulShutdownTimeout; 0: its default, < 0: no limit
	addReconcilers error         // what addReconcilers returns
	leaseConfig    *rest.Config  // the lease's config; nil: the admin's
}

func (g *group) start(o replicaOptions) *replica {
	g.t.Helper()
	mgrOpts := ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	if o.gracefulStop != 0 {
		mgrOpts.GracefulShutdownTimeout = &o.gracefulStop
	}
	leaseConfig := api.Admin
	if o.leaseConfig != nil {
		leaseConfig = o.leaseConfig
	}
	mgr, err := ctrl.NewManager(api.Admin, mgrOpts)
	if err != nil {
		g.t.Fatal(err)
	}
	r := &replica{done: make(chan error, 1), reconcile: make(chan struct{}), ended: make(chan struct{}), unstick: make(chan struct{})}
	reconciler := manager.RunnableFunc(func(ctx context.Context) error {
		defer close(r.ended)
		g.most.Store(max(g.most.Load(), g.leading.Add(1)))
		defer g.leading.Add(-1)
		close(r.reconcile)
		<-ctx.Done()
		if o.stuck {
			<-r.unstick
		}
		return nil
	})
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	go func() {
		r.done <- runElected(ctx, mgr, leaseConfig, "default", g.lease, func() error {
			if o.addReconcilers != nil {
				return o.addReconcilers
			}
			return mgr.Add(reconciler)
		})
	}()
	g.t.Cleanup(func() {
		stop()
		close(r.unstick)
		select {
		case <-r.done:
		case <-time.After(testwait.Hang):
			g.t.Error("runElected did not return")
		}
	})
	return r
}

// holder is the identity the lease names now.
func (g *group) holder() string {
	g.t.Helper()
	l, err := g.cs.CoordinationV1().Leases("default").Get(context.Background(), g.lease, metav1.GetOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// takeLease writes the lease as "another-replica"'s, as a replica that
// took it would.
func (g *group) takeLease() {
	g.t.Helper()
	testwait.For(g.t, "the lease taken by another replica", func() bool {
		l, err := g.cs.CoordinationV1().Leases("default").Get(context.Background(), g.lease, metav1.GetOptions{})
		if err != nil {
			return false
		}
		other, now := "another-replica", metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &other, &now, &now
		_, err = g.cs.CoordinationV1().Leases("default").Update(context.Background(), l, metav1.UpdateOptions{})
		return err == nil
	})
}

// wait is what runElected returned, within Hang.
func wait(t *testing.T, r *replica) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(testwait.Hang):
		t.Fatal("runElected did not return")
		return nil
	}
}

func waitFor(t *testing.T, what string, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(testwait.Hang):
		t.Fatalf("no %s within %s", what, testwait.Hang)
	}
}

// errorLines are the error-level lines logged since from.
func errorLines(from int) []string {
	var bad []string
	for _, line := range strings.Split(logs.String()[from:], "\n") {
		if strings.Contains(line, `"level":"error"`) || strings.Contains(line, "leader election lost") {
			bad = append(bad, line)
		}
	}
	return bad
}

// One replica reconciles at a time; a standby stops without a word; the
// leader stops its reconcilers, then hands the lease on, so the next one
// takes it without waiting out its 15 s; no stop logs an error. Before,
// under the manager's own election, every stop logged "leader election
// lost" at error level with a stack.
func TestLeaseHandedOnOnceTheReconcilersStop(t *testing.T) {
	g := newGroup(t, "hand-on")
	from := len(logs.String())
	a := g.start(replicaOptions{})
	waitFor(t, "reconciler on the first replica", a.reconcile)
	first := g.holder()

	standby := g.start(replicaOptions{})
	// A standby that stops: it never led.
	testwait.For(t, "the standby to stand for election", func() bool {
		return strings.Count(logs.String()[from:], `"Attempting to acquire leader lease...","lock":"default/`+g.lease+`"`) == 2
	})
	standby.stop()
	if err := wait(t, standby); err != nil {
		t.Fatalf("a standby's clean stop: %v", err)
	}
	select {
	case <-standby.reconcile:
		t.Fatal("the standby reconciled while the first replica held the lease")
	default:
	}

	next := g.start(replicaOptions{})
	a.stop()
	if err := wait(t, a); err != nil {
		t.Fatalf("the leader's clean stop: %v", err)
	}
	select {
	case <-a.ended:
	default:
		t.Fatal("runElected returned before its reconciler stopped")
	}
	if h := g.holder(); h == first {
		t.Fatalf("the lease still names %s once it has stopped: not handed on", first)
	}
	waitFor(t, "reconciler on the next replica", next.reconcile)
	next.stop()
	if err := wait(t, next); err != nil {
		t.Fatal(err)
	}
	if n := g.most.Load(); n != 1 {
		t.Errorf("%d replicas reconciled at once", n)
	}
	if bad := errorLines(from); len(bad) > 0 {
		t.Errorf("a clean stop logged errors:\n%s", strings.Join(bad, "\n"))
	}
}

// A manager whose graceful shutdown times out, its reconciler still
// running: the lease is not handed on (another replica would reconcile
// beside it), it expires instead.
func TestLeaseKeptWhileAReconcilerWillNotStop(t *testing.T) {
	g := newGroup(t, "kept")
	a := g.start(replicaOptions{stuck: true, gracefulStop: 500 * time.Millisecond})
	waitFor(t, "reconciler", a.reconcile)
	first := g.holder()
	a.stop()
	err := wait(t, a)
	if err == nil || errors.Is(err, errLeaseLost) {
		t.Fatalf("runElected = %v, want the manager's shutdown error", err)
	}
	if h := g.holder(); h != first {
		t.Fatalf("the lease names %q, want %q still: handed on while its reconciler runs", h, first)
	}
}

// A lease another replica takes (its renewals fail for RenewDeadline)
// ends runElected with errLeaseLost at once, without waiting for a
// reconciler that ignores its context, and the other's lease is left as
// it is.
func TestLostLeaseEndsAtOnce(t *testing.T) {
	g := newGroup(t, "lost")
	// No limit on the graceful stop: waiting for the reconciler would hang.
	a := g.start(replicaOptions{stuck: true, gracefulStop: -1})
	waitFor(t, "reconciler", a.reconcile)
	g.takeLease()
	err := wait(t, a)
	if !errors.Is(err, errLeaseLost) || !strings.Contains(err.Error(), "default/"+g.lease) {
		t.Fatalf("runElected = %v, want errLeaseLost naming the lease", err)
	}
	select {
	case <-a.ended:
		t.Fatal("the stuck reconciler returned: the test proves nothing")
	default:
	}
	if h := g.holder(); h != "another-replica" {
		t.Fatalf("the lease names %q: another's lease was released", h)
	}
}

// A lease lost while the manager waits for a reconciler to stop is still
// an error, although ctx has ended.
func TestLeaseLostDuringTheGracefulStop(t *testing.T) {
	g := newGroup(t, "lost-in-drain")
	a := g.start(replicaOptions{stuck: true, gracefulStop: -1})
	waitFor(t, "reconciler", a.reconcile)
	a.stop()
	g.takeLease()
	if err := wait(t, a); !errors.Is(err, errLeaseLost) {
		t.Fatalf("runElected = %v, want errLeaseLost", err)
	}
	if h := g.holder(); h != "another-replica" {
		t.Fatalf("the lease names %q: another's lease was released", h)
	}
}

// Renewals that fail (an API server that does not answer them) end in a
// lost lease; client-go then releases it, at once, when the API server
// answers again: another replica would take it while this one's reconciler
// still runs. The lease is left to expire instead.
func TestNoReleaseAfterRenewalsFail(t *testing.T) {
	g := newGroup(t, "renewals-fail")
	var holder atomic.Pointer[string]
	cfg := rest.CopyConfig(api.Admin)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return renewalsFail{rt, &holder} })
	a := g.start(replicaOptions{stuck: true, gracefulStop: -1, leaseConfig: cfg})
	waitFor(t, "reconciler", a.reconcile)
	first := g.holder()
	holder.Store(&first)
	if err := wait(t, a); !errors.Is(err, errLeaseLost) {
		t.Fatalf("runElected = %v, want errLeaseLost", err)
	}
	if h := g.holder(); h != first {
		t.Fatalf("the lease names %q, want %q still: released while its reconciler runs", h, first)
	}
}

// renewalsFail fails every write of a lease that names holder (a
// renewal), once holder is set, whatever the encoding (JSON or protobuf);
// a read, and a write that names none (a release), go through.
type renewalsFail struct {
	http.RoundTripper
	holder *atomic.Pointer[string]
}

func (r renewalsFail) RoundTrip(req *http.Request) (*http.Response, error) {
	if h := r.holder.Load(); h != nil && req.Method == http.MethodPut {
		if req.GetBody == nil {
			return nil, errors.New("renewalsFail: a PUT whose body cannot be read again")
		}
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		if strings.Contains(string(data), *h) {
			return nil, errors.New("renewals fail in this test")
		}
	}
	return r.RoundTripper.RoundTrip(req)
}

// addReconcilers' error ends runElected with it, once the manager has
// stopped, and the lease is handed on.
func TestAddReconcilersErrorEndsIt(t *testing.T) {
	g := newGroup(t, "add-fails")
	bad := errors.New("no reconciler for you")
	a := g.start(replicaOptions{addReconcilers: bad})
	if err := wait(t, a); !errors.Is(err, bad) {
		t.Fatalf("runElected = %v, want %v", err, bad)
	}
	if h := g.holder(); h != "" {
		t.Fatalf("the lease names %q after the stop: not handed on", h)
	}
}

// fakeLease hands each request's context to the test, and waits for it
// to say the request is done.
type fakeLease struct {
	resourcelock.Interface // only Update is called
	requests               chan context.Context
	finish                 chan struct{}
}

func (f *fakeLease) Update(ctx context.Context, _ resourcelock.LeaderElectionRecord) error {
	f.requests <- ctx
	<-f.finish
	return nil
}

// A renewal in flight when the election's context is cancelled (the
// stop) goes on, under the deadline it had; a release is written only once
// runElected allows it.
func TestHeldLeaseFinishesARequestInFlight(t *testing.T) {
	fake := &fakeLease{requests: make(chan context.Context, 1), finish: make(chan struct{})}
	held := &heldLease{Interface: fake}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	want, _ := ctx.Deadline()
	done := make(chan error, 1)
	go func() { done <- held.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}) }()
	inFlight := <-fake.requests
	cancel()
	if err := inFlight.Err(); err != nil {
		t.Fatalf("the request's context ended with the election's: %v", err)
	}
	if got, ok := inFlight.Deadline(); !ok || !got.Equal(want) {
		t.Fatalf("the request's deadline is %v (%v), want %v", got, ok, want)
	}
	close(fake.finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The release: not written until runElected allows it, then written.
	if err := held.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fake.requests:
		t.Fatal("the release was written before runElected allowed it")
	default:
	}
	held.release.Store(true)
	go func() { done <- held.Update(context.Background(), resourcelock.LeaderElectionRecord{}) }()
	select {
	case <-fake.requests:
	case <-time.After(testwait.Hang):
		t.Fatal("the release was not written once allowed")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
