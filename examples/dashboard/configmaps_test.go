package main

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// answering is a dashboard whose cluster answers every list of ConfigMaps
// with list or err, and records the namespaces asked for. The real API
// server, acting as each person, is the integration tests'.
func answering(list *corev1.ConfigMapList, err error) (*dashboard, *[]string) {
	return answeringReview(list, err, false, nil)
}

// answeringReview is answering, with a SelfSubjectAccessReview answered
// allowed, or refused with reviewErr.
func answeringReview(list *corev1.ConfigMapList, err error, allowed bool, reviewErr error) (*dashboard, *[]string) {
	d := testDashboard()
	cs := fake.NewClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if reviewErr != nil {
			return true, nil, reviewErr
		}
		review := a.(k8stesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview)
		review.Status.Allowed = allowed
		return true, review, nil
	})
	var asked []string
	cs.PrependReactor("list", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		asked = append(asked, a.GetNamespace())
		if list == nil {
			return true, nil, err
		}
		return true, list, err
	})
	d.cluster = cs
	return d, &asked
}

func TestConfigMapsPageListsWhatTheClusterAnswers(t *testing.T) {
	d, asked := answering(&corev1.ConfigMapList{Items: []corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "welcome"}}, {ObjectMeta: metav1.ObjectMeta{Name: "<b>bold</b>"}},
	}}, nil)
	d.namespace = "team-a"
	resp, body := serve(t, d, as(http.MethodGet, "/configmaps", "alice", nil, nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /configmaps: %d %s", resp.StatusCode, body)
	}
	for _, want := range []string{`<span id="namespace">team-a</span>`, `<strong id="user">alice</strong>`, "<li>welcome</li>", "<li>&lt;b&gt;bold&lt;/b&gt;</li>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not contain %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `id="forbidden"`) || strings.Contains(body, `id="more"`) {
		t.Errorf("the page says more than the list:\n%s", body)
	}
	_, body = serve(t, d, as(http.MethodGet, "/configmaps?namespace=team-b", "alice", nil, nil))
	if !strings.Contains(body, `<span id="namespace">team-b</span>`) {
		t.Errorf("?namespace=team-b: the page is not team-b's:\n%s", body)
	}
	if got := strings.Join(*asked, ","); got != "team-a,team-b" {
		t.Errorf("namespaces listed: %s, want team-a,team-b", got)
	}
}

func TestConfigMapsPageSaysWhenThereAreNoneOrMore(t *testing.T) {
	d, _ := answering(&corev1.ConfigMapList{}, nil)
	if _, body := serve(t, d, as(http.MethodGet, "/configmaps", "alice", nil, nil)); !strings.Contains(body, `<p id="none">There are no ConfigMaps in default.</p>`) {
		t.Errorf("an empty list:\n%s", body)
	}
	d, _ = answering(&corev1.ConfigMapList{ListMeta: metav1.ListMeta{Continue: "next"}, Items: []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}}, nil)
	if _, body := serve(t, d, as(http.MethodGet, "/configmaps", "alice", nil, nil)); !strings.Contains(body, `id="more"`) {
		t.Errorf("a list with more to come does not say so:\n%s", body)
	}
}

// The API server's 403 is a page that says what the person may not do, in
// its words, with status 403; a refusal to let the dashboard impersonate
// says it is the dashboard's RBAC that lacks it.
func TestConfigMapsPageShowsTheClustersRefusal(t *testing.T) {
	mayNot := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New(`User "bob" cannot list resource "configmaps" in API group "" in the namespace "default"`))
	impersonateOn := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New(`User "dashboard" cannot impersonate-on:user-info:list resource "configmaps"`))
	for _, tc := range []struct {
		name      string
		err       error
		allowed   bool  // the person may list, says the review
		reviewErr error // the review refused
		groups    []string
		want      []string
	}{{
		name: "the person may not list",
		err:  mayNot,
		want: []string{`<p id="forbidden">You may not list ConfigMaps in default.</p>`, `User &#34;bob&#34; cannot list resource`},
	}, {
		name:      "the person may not list, and the review cannot be asked",
		err:       mayNot,
		reviewErr: errors.New("connection refused"),
		want:      []string{`<p id="forbidden">You may not list ConfigMaps in default.</p>`},
	}, {
		name: "the dashboard may not impersonate the person",
		err:  apierrors.NewForbidden(schema.GroupResource{Resource: "users"}, "bob", errors.New(`User "dashboard" cannot impersonate resource "users" in API group ""`)),
		want: []string{`does not let the dashboard act as you`, `User &#34;dashboard&#34; cannot impersonate`},
	}, {
		name:    "the dashboard may not act as the person for a list, which the person may do",
		err:     impersonateOn,
		allowed: true,
		want:    []string{`does not let the dashboard act as you`, `impersonate-on:user-info:list`},
	}, {
		name:      "the dashboard may not even ask as the person",
		err:       impersonateOn,
		reviewErr: apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, "", errors.New("cannot impersonate-on:user-info:create")),
		want:      []string{`does not let the dashboard act as you`},
	}, {
		name: "the person is in system:masters, whom constrained impersonation never acts as",
		err: apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "groups"}, "system:masters",
			errors.New("impersonating the system:masters group is not allowed")),
		want: []string{`does not let the dashboard act as a member of system:masters`},
	}, {
		name:      "the person is in system:masters, and the API server names another mode's refusal",
		groups:    []string{"system:masters", "system:authenticated"},
		err:       apierrors.NewForbidden(schema.GroupResource{Resource: "users"}, "admin", errors.New(`User "dashboard" cannot impersonate resource "users"`)),
		reviewErr: apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, "", errors.New("cannot impersonate")),
		want:      []string{`does not let the dashboard act as a member of system:masters`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := answeringReview(nil, tc.err, tc.allowed, tc.reviewErr)
			resp, body := serve(t, d, as(http.MethodGet, "/configmaps", "bob", tc.groups, nil))
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("status %d, want 403", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q, want a page", got)
			}
			for _, want := range tc.want {
				if !strings.Contains(body, want) {
					t.Errorf("the page does not contain %q:\n%s", want, body)
				}
			}
			if strings.Contains(body, "<li>") {
				t.Errorf("a refused list shows items:\n%s", body)
			}
			if strings.Count(body, `id="forbidden"`) != 1 {
				t.Errorf("the page says why %d times:\n%s", strings.Count(body, `id="forbidden"`), body)
			}
		})
	}
}

func TestConfigMapsPageRefusesWhatItCannotAsk(t *testing.T) {
	d, asked := answering(&corev1.ConfigMapList{}, nil)
	for _, ns := range []string{"..", "a/b", "UPPER", strings.Repeat("a", 64), "%2e%2e"} {
		resp, body := serve(t, d, as(http.MethodGet, "/configmaps?namespace="+ns, "alice", nil, nil))
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("namespace %q: %d %s, want 400", ns, resp.StatusCode, body)
		}
	}
	if len(*asked) != 0 {
		t.Errorf("bad namespaces reached the cluster: %v", *asked)
	}

	d, _ = answering(nil, errors.New("dial tcp 10.0.0.1:443: connection refused"))
	resp, body := serve(t, d, as(http.MethodGet, "/configmaps", "alice", nil, nil))
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "10.0.0.1") {
		t.Errorf("the cluster unreachable: %d %q, want 502 naming nothing of it", resp.StatusCode, body)
	}

	d = testDashboard()
	if resp, _ := serve(t, d, as(http.MethodGet, "/configmaps", "alice", nil, nil)); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("no cluster: %d, want 503", resp.StatusCode)
	}
	if resp, _ := serve(t, d, as(http.MethodGet, "/configmaps", "", nil, nil)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no caller: %d, want 401", resp.StatusCode)
	}
}
