package eks_test

import (
	"context"
	"testing"
	"time"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// A vault logs in again before the token expires: here the role's session
// lasts 8 s, so each token does, and every login happens while the token
// before it still serves. (8 s, not 3: the refresh starts when a quarter to
// a half of the usable 6 s is left, which leaves a busy machine's timer and
// login seconds to spare; the promise, not the scheduler, decides.)
func TestVaultRefreshesBeforeExpiry(t *testing.T) {
	s := newSTSStub(t)
	s.lifetime = 8 * time.Second
	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.RoleARN = testRoleARN
	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(eks.Login(opts), login.Timeout(5*time.Second))

	ctx, cancel := context.WithTimeout(context.Background(), 2*testwait.Hang) // four logins take about 12 s
	defer cancel()
	tokens := map[string]bool{}
	for len(s.issues()) < 4 {
		if ctx.Err() != nil {
			t.Fatalf("%d logins in %v, want 4: the vault does not refresh before the 8-s tokens expire", len(s.issues()), 2*testwait.Hang)
		}
		cred, err := v.Select(ctx)
		if err != nil {
			t.Fatalf("after %d logins: %v", len(s.issues()), err)
		}
		if now := time.Now(); !cred.Info.Expiration.After(now) {
			t.Fatalf("the vault handed out a token that expired at %v (now %v)", cred.Info.Expiration, now)
		}
		if !tokens[cred.Info.Token] {
			tokens[cred.Info.Token] = true
			if code, body := s.callPresigned(t, presignedURL(t, cred.Info.Token), testCluster); code != 200 {
				t.Fatalf("a token from the vault does not verify: %d %s", code, body)
			}
		}
		time.Sleep(50 * time.Millisecond) // a caller's pace, not an assertion
	}
	issued := s.issues()
	for i := 1; i < len(issued); i++ {
		if !issued[i].at.Before(issued[i-1].expires) {
			t.Errorf("login %d at %v, after the token before it expired at %v", i+1, issued[i].at, issued[i-1].expires)
		}
	}
	if len(tokens) < 3 {
		t.Errorf("got %d different tokens from the vault, want the refreshed ones too", len(tokens))
	}
}
