package fleet

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// OnAdd gets the cluster and a context that ends when it leaves: OnRemove
// finds it ended, its cause says why, and the member's RESTConfig never
// reaches a namesake added after it.
func TestOnAddGetsTheMemberAndAContextThatEndsWhenItLeaves(t *testing.T) {
	ctx := ctxFor(t)
	var logs testlog.Buffer
	var mu sync.Mutex // guards joined and endedAtRemove
	var joined []*Member
	var ctxs []context.Context
	var endedAtRemove []bool
	f := New(Options{
		Logger: logs.Logger(0),
		OnAdd: func(ctx context.Context, m *Member) {
			logr.FromContextOrDiscard(ctx).Info("joined")
			mu.Lock()
			defer mu.Unlock()
			joined, ctxs = append(joined, m), append(ctxs, ctx)
		},
		OnRemove: func(m *Member) {
			mu.Lock()
			defer mu.Unlock()
			for i, j := range joined {
				if j == m {
					endedAtRemove = append(endedAtRemove, ctxs[i].Err() != nil)
				}
			}
		},
	})
	defer f.Close()
	api := newAPIServer(t)
	if err := f.Add("a", api.login); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	first, firstCtx := joined[0], ctxs[0]
	mu.Unlock()
	if first.Name() != "a" || first.Vault() != f.Vault("a") {
		t.Fatalf("OnAdd got %q and another vault; want a and its vault", first.Name())
	}
	if firstCtx.Err() != nil {
		t.Fatal("OnAdd's context has ended while the cluster is in the fleet")
	}
	if !strings.Contains(logs.String(), `"cluster"="a"`) {
		t.Errorf("the logger of OnAdd's context does not name the cluster: %s", logs.String())
	}
	cfg, err := first.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if byName, err := f.RESTConfig(ctx, "a"); err != nil || byName != cfg {
		t.Fatalf("Fleet.RESTConfig = %p, %v; want the member's %p", byName, err, cfg)
	}

	f.Remove("a")
	if firstCtx.Err() == nil {
		t.Fatal("OnAdd's context goes on after Remove")
	}
	if cause := context.Cause(firstCtx); !errors.Is(cause, ErrUnknownCluster) || !strings.Contains(cause.Error(), `"a" has left the fleet`) {
		t.Errorf("the cause of the end = %v, want ErrUnknownCluster, saying a has left", cause)
	}
	if err := f.Add("a", api.login); err != nil {
		t.Fatal(err)
	}
	if got, err := first.RESTConfig(ctx); !errors.Is(err, ErrUnknownCluster) {
		t.Errorf("RESTConfig of the member that left = %v, %v; want ErrUnknownCluster, not its namesake's config", got, err)
	}
	mu.Lock()
	second, secondCtx := joined[1], ctxs[1]
	mu.Unlock()
	if second == first || secondCtx.Err() != nil {
		t.Fatal("the cluster added again is the same member, or its context has ended")
	}
	if _, err := second.RESTConfig(ctx); err != nil {
		t.Errorf("the new member: %v", err)
	}

	f.Close()
	if cause := context.Cause(secondCtx); !errors.Is(cause, ErrClosed) {
		t.Errorf("the cause after Close = %v, want ErrClosed", cause)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(endedAtRemove) != 2 || !endedAtRemove[0] || !endedAtRemove[1] {
		t.Errorf("OnRemove found OnAdd's context ended: %v, want [true true]", endedAtRemove)
	}
}

// A caller waiting in a member's RESTConfig for a first login that does
// not come is let go as the member leaves, before its vault closes: an
// OnRemove that waits for what OnAdd started to stop is not held up by it.
func TestMemberRESTConfigLetsGoWhenTheMemberLeaves(t *testing.T) {
	returned := make(chan error, 1)
	var leftInOnRemove bool // the caller was let go while OnRemove waited
	f := New(Options{
		OnAdd: func(_ context.Context, m *Member) {
			// Not on OnAdd's context: as code that got the member
			// elsewhere might.
			go func() {
				_, err := m.RESTConfig(context.Background())
				returned <- err
			}()
		},
		OnRemove: func(*Member) {
			// Held up, the caller would be let go only as the vault
			// closes, after OnRemove: this wait would run out.
			select {
			case err := <-returned:
				returned <- err
				leftInOnRemove = true
			case <-time.After(testwait.Hang):
			}
		},
	})
	defer f.Close()
	loggingIn := make(chan struct{})
	var once sync.Once
	hung := func(ctx context.Context) (*login.ConnectionInfo, error) {
		once.Do(func() { close(loggingIn) }) // the first use of the config: the caller waits
		<-ctx.Done()                         // a login that does not come back in time
		return nil, ctx.Err()
	}
	if err := f.Add("slow", hung, login.Timeout(time.Minute)); err != nil {
		t.Fatal(err)
	}
	<-loggingIn
	f.Remove("slow")
	if !leftInOnRemove {
		t.Errorf("OnRemove waited %v for the caller of RESTConfig, in vain", testwait.Hang)
	}
	if err := <-returned; !errors.Is(err, ErrUnknownCluster) {
		t.Errorf("RESTConfig of a member that left while it waited = %v, want ErrUnknownCluster", err)
	}
}
