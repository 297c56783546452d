package side

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The addon's callers: how many, how often each calls, the path they get,
// and the life of their tokens (TokenRequest's shortest).
const (
	addonCallers   = 3
	addonCallEvery = time.Second
	addonPath      = "/addon"
	callerTokenTTL = 10 * time.Minute
	// renewAt is the part of a token's life after which its caller asks
	// for the next.
	renewAt = 0.8
)

// addon is a service on loopback with the side's check of its callers in
// front, and the callers: ServiceAccounts of the side's namespace, each
// with a token from TokenRequest, calling it once a second.
type addon struct {
	rec       *recorder
	cs        kubernetes.Interface
	ns        string
	audiences []string
	authorize bool
}

// run serves the addon and runs its callers until ctx ends.
func (a *addon) run(ctx context.Context, front func(http.Handler) (http.Handler, error)) error {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	h, err := front(upstream)
	if err != nil {
		return fmt.Errorf("soak: the addon's front: %w", err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Timeout: opTimeout, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	if a.authorize {
		a.until(ctx, a.grant)
	}
	var wg sync.WaitGroup
	for i := range addonCallers {
		wg.Go(func() { a.caller(ctx, client, srv.URL+addonPath, fmt.Sprintf("soak-caller-%d", i)) })
	}
	wg.Wait()
	return nil
}

// until runs do until it succeeds or ctx ends, recording its failures.
func (a *addon) until(ctx context.Context, do func(context.Context) error) bool {
	for ctx.Err() == nil {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		err := do(octx)
		cancel()
		if err == nil {
			return true
		}
		a.rec.fail(compAddon, "", "", err)
		sleep(ctx, retryPause)
	}
	return false
}

// grant lets the side's callers get the addon's path: what its front asks
// the API server in a SubjectAccessReview.
func (a *addon) grant(ctx context.Context) error {
	name := "soak-addon-" + a.ns
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{addonPath}, Verbs: []string{"get"}}},
	}
	if _, err := a.cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
	}
	for i := range addonCallers {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: a.ns, Name: fmt.Sprintf("soak-caller-%d", i)})
	}
	if _, err := a.cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// caller is one ServiceAccount calling url every addonCallEvery until ctx
// ends, with a token it renews at renewAt of its life.
func (a *addon) caller(ctx context.Context, client *http.Client, url, name string) {
	if !a.until(ctx, func(ctx context.Context) error {
		_, err := a.cs.CoreV1().ServiceAccounts(a.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}) {
		return
	}
	var token string
	var renew time.Time
	t := time.NewTicker(addonCallEvery)
	defer t.Stop()
	for {
		if time.Now().After(renew) {
			if tok, exp, err := a.token(ctx, name); err != nil {
				a.rec.fail(compAddon, "", "", err)
			} else {
				token = tok
				renew = time.Now().Add(time.Duration(float64(time.Until(exp)) * renewAt))
			}
		}
		if token != "" {
			a.call(ctx, client, url, token)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// token is a new token for the ServiceAccount name, and when it expires.
func (a *addon) token(ctx context.Context, name string) (string, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	ttl := int64(callerTokenTTL / time.Second)
	tr, err := a.cs.CoreV1().ServiceAccounts(a.ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: a.audiences, ExpirationSeconds: &ttl},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// call makes one call of the addon; anything but 200 is a failure.
func (a *addon) call(ctx context.Context, client *http.Client, url, token string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		a.rec.fail(compAddon, "", "", err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		// net/http's errors quote the URL, which holds no secret; the
		// token is in a header.
		a.rec.fail(compAddon, "", "", err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		a.rec.fail(compAddon, "", "", statusError{code: resp.StatusCode})
		return
	}
	a.rec.succeed(compAddon)
}
