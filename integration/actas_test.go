package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/testkit/manifests"
)

// deployedDashboardNamespace is the namespace deploy/dashboard's
// ServiceAccount lives in; bindImpersonation binds another's.
const deployedDashboardNamespace = "authvault-dashboard"

// bindImpersonation applies the ClusterRoles and ClusterRoleBindings of
// deploy/dashboard's file as they are written, for the ServiceAccount
// dashboard of ns and under names of ns's own; the func it returns deletes
// them.
func bindImpersonation(ctx context.Context, ns, file string) func(context.Context) {
	GinkgoHelper()
	docs, err := manifests.Read("../deploy/dashboard")
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cluster.Admin, client.Options{})
	Expect(err).NotTo(HaveOccurred())
	var applied []*unstructured.Unstructured
	for _, d := range docs {
		if filepath.Base(d.File) != file {
			continue
		}
		obj := retarget(d.Object, deployedDashboardNamespace, ns)
		obj.SetName(obj.GetName() + "-" + ns)
		if obj.GetKind() == "ClusterRoleBinding" {
			role, _, _ := unstructured.NestedString(obj.Object, "roleRef", "name")
			Expect(unstructured.SetNestedField(obj.Object, role+"-"+ns, "roleRef", "name")).To(Succeed())
		}
		Expect(apply(ctx, c, obj)).To(Succeed(), "%s: %s %s", file, obj.GetKind(), obj.GetName())
		applied = append(applied, obj)
	}
	Expect(applied).To(HaveLen(2), "deploy/dashboard/%s: a ClusterRole and its binding", file)
	return func(ctx context.Context) {
		for _, obj := range applied {
			Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
		}
	}
}

var listedItem = regexp.MustCompile(`<li>([^<]*)</li>`)

// listedConfigMaps is the list of names the dashboard's ConfigMaps page
// shows, or what the page says instead.
func listedConfigMaps(page string) string {
	start := strings.Index(page, `<ul id="configmaps">`)
	if start < 0 {
		if i := strings.Index(page, `<p id="forbidden">`); i >= 0 {
			return "refused: " + page[i:]
		}
		return "no list in " + page
	}
	end := strings.Index(page[start:], "</ul>")
	var names []string
	for _, m := range listedItem.FindAllStringSubmatch(page[start:start+end], -1) {
		names = append(names, m[1])
	}
	return strings.Join(names, ",")
}

// impersonations are the audit log's requests by user that acted as
// someone, as "IMPERSONATED CONSTRAINT VERB NAMESPACE/RESOURCE CODE"
// (CONSTRAINT "-" for classic impersonation).
func impersonations(user string) []string {
	GinkgoHelper()
	events, err := cluster.AuditEvents()
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range events {
		if e.User.Username != user || e.ImpersonatedUser == nil {
			continue
		}
		constraint := "-"
		if e.AuthenticationMetadata != nil && e.AuthenticationMetadata.ImpersonationConstraint != "" {
			constraint = e.AuthenticationMetadata.ImpersonationConstraint
		}
		what := e.RequestURI
		if e.ObjectRef != nil {
			what = e.ObjectRef.Namespace + "/" + e.ObjectRef.Resource
		}
		code := int32(0)
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		out = append(out, fmt.Sprintf("%s %s %s %s %d", e.ImpersonatedUser.Username, constraint, e.Verb, what, code))
	}
	return out
}
