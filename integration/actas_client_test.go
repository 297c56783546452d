package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testwait"
)

// ActAsCaller in process, with controller-runtime's client, for a caller
// that brings a ServiceAccount token: the service may act as
// ServiceAccounts only to list ConfigMaps (constrained impersonation's
// serviceaccount mode, which takes the name alone).
var _ = Describe("addonauth.ActAsCaller with controller-runtime's client", func() {
	It("lists as the ServiceAccount that called, with a RESTMapper of the service's own; without one, discovery has no one to act as", func(ctx SpecContext) {
		const audience = "actas.example"
		ns := newNamespace("actas")
		newServiceAccount(ctx, ns, "reader")
		caller := "system:serviceaccount:" + ns + ":reader"
		for _, name := range []string{"one", "two"} {
			_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		By("the service: its own identity, allowed to act as ServiceAccounts to list ConfigMaps, and to verify tokens")
		service := "actas-service-" + ns
		u, err := cluster.Env.AddUser(envtest.User{Name: service, Groups: []string{testcluster.AuditedGroup}}, nil)
		Expect(err).NotTo(HaveOccurred())
		role, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: service},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"impersonate-on:serviceaccount:list"}},
				{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate:serviceaccount"}},
				{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
				// What system:service-account-issuer-discovery grants
				// ServiceAccounts: the service is a user here.
				{NonResourceURLs: []string{"/.well-known/openid-configuration", "/openid/v1/jwks"}, Verbs: []string{"get"}},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = admin.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
		})
		binding, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: service},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: service}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		})

		own := u.Config()
		a, err := addonauth.New(addonauth.Options{Audience: audience, Config: own})
		Expect(err).NotTo(HaveOccurred())
		acting, err := addonauth.ActAsCaller(own)
		Expect(err).NotTo(HaveOccurred())
		httpClient, err := rest.HTTPClientFor(own)
		Expect(err).NotTo(HaveOccurred())
		mapper, err := apiutil.NewDynamicRESTMapper(own, httpClient)
		Expect(err).NotTo(HaveOccurred())
		withMapper, err := client.New(acting, client.Options{Mapper: mapper})
		Expect(err).NotTo(HaveOccurred())
		withoutMapper, err := client.New(acting, client.Options{})
		Expect(err).NotTo(HaveOccurred())

		list := func(c client.Client) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				var cms corev1.ConfigMapList
				err := c.List(r.Context(), &cms, client.InNamespace(ns))
				switch {
				case apierrors.IsForbidden(err):
					http.Error(w, err.Error(), http.StatusForbidden)
				case err != nil:
					http.Error(w, err.Error(), http.StatusBadGateway)
				default:
					var names []string
					for _, cm := range cms.Items {
						names = append(names, cm.Name)
					}
					fmt.Fprint(w, strings.Join(names, ","))
				}
			}
		}
		mux := http.NewServeMux()
		mux.Handle("/with-mapper", a.Middleware(list(withMapper)))
		mux.Handle("/without-mapper", a.Middleware(list(withoutMapper)))
		srv := httptest.NewServer(mux)
		DeferCleanup(srv.Close)
		token := saToken(ctx, ns, "reader", audience)
		call := func(path string) (int, string) {
			GinkgoHelper()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}

		By("before the ServiceAccount may list: the API server's 403, naming it")
		Eventually(func() string { _, body := call("/with-mapper"); return body }).WithTimeout(testwait.Hang).Should(
			ContainSubstring(`User "` + caller + `" cannot list resource "configmaps"`))

		By("once it may")
		_, err = admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { _, body := call("/with-mapper"); return body }).WithTimeout(testwait.Hang).Should(Equal("one,two"))
		Eventually(func() []string { return impersonations(service) }).WithTimeout(testwait.Hang).Should(
			ContainElement(fmt.Sprintf("%s impersonate:serviceaccount list %s/configmaps 200", caller, ns)),
			"the audit log: the service, acting as the ServiceAccount by name, by constrained impersonation")

		By("a client whose RESTMapper would discover as the caller")
		code, body := call("/without-mapper")
		Expect(code).To(Equal(http.StatusBadGateway), body)
		Expect(body).To(ContainSubstring("no verified caller"), "discovery runs with a context of its own: ErrNoCaller, never the service's own request")
	})
})
