package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/testkit/manifests"
)

// The manifests users deploy the sidecar with, against the real API
// server: its schemas, its Pod Security admission and its RBAC.
var _ = Describe("The manifests under deploy/", func() {
	var (
		docs []manifests.Doc
		// ns is the namespace the manifests name; objects are sent to
		// testNS instead, which has the same labels.
		ns, testNS string
		c          client.Client
	)
	BeforeEach(func(ctx SpecContext) {
		dirs, err := filepath.Glob("../deploy/*")
		Expect(err).NotTo(HaveOccurred())
		Expect(dirs).To(ConsistOf("../deploy/addon-proxy", "../deploy/dashboard"), "a directory of deploy/ no spec reads")
		docs, err = manifests.Read("../deploy/addon-proxy")
		Expect(err).NotTo(HaveOccurred())
		namespaces := manifests.Find(docs, "Namespace")
		Expect(namespaces).To(HaveLen(1))
		ns = namespaces[0].GetName()
		created, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "deploy-", Labels: namespaces[0].GetLabels()},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		testNS = created.Name
		c, err = client.New(cluster.Admin, client.Options{})
		Expect(err).NotTo(HaveOccurred())
	})

	It("fit together: one namespace, the Deployment's ServiceAccount is bound, the Service selects its pods, kustomize lists every file", func() {
		for _, d := range docs {
			if d.Object.GetKind() != "Namespace" && d.Object.GetNamespace() != "" {
				Expect(d.Object.GetNamespace()).To(Equal(ns), "%s %s", d.Object.GetKind(), d.Object.GetName())
			}
		}
		var dep appsv1.Deployment
		var sa corev1.ServiceAccount
		var svc corev1.Service
		Expect(manifests.One(docs, "Deployment", &dep)).To(Succeed())
		Expect(manifests.One(docs, "ServiceAccount", &sa)).To(Succeed())
		Expect(manifests.One(docs, "Service", &svc)).To(Succeed())
		Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal(sa.Name))
		Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels))).To(BeTrue(),
			"the Service's selector %v does not select the pods %v", svc.Spec.Selector, dep.Spec.Template.Labels)

		roles := map[string]bool{}
		for _, r := range manifests.Find(docs, "ClusterRole") {
			roles[r.GetName()] = true
		}
		var bound []string
		for _, u := range manifests.Find(docs, "ClusterRoleBinding") {
			var b rbacv1.ClusterRoleBinding
			Expect(manifests.One([]manifests.Doc{{Object: u}}, "ClusterRoleBinding", &b)).To(Succeed())
			if slices.Contains(b.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}) {
				Expect(roles).To(HaveKey(b.RoleRef.Name), "%s binds a ClusterRole deploy/ does not hold", b.Name)
				bound = append(bound, b.RoleRef.Name)
			}
		}
		Expect(bound).NotTo(BeEmpty(), "no ClusterRoleBinding binds the ServiceAccount %s/%s", sa.Namespace, sa.Name)

		var kustomization struct {
			Resources []string `json:"resources"`
		}
		ks := manifests.Find(docs, "Kustomization")
		Expect(ks).To(HaveLen(1))
		Expect(runtimeFrom(ks[0], &kustomization)).To(Succeed())
		var files []string
		for _, d := range docs {
			if f := filepath.Base(d.File); f != "kustomization.yaml" && !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
		Expect(kustomization.Resources).To(ConsistOf(files))
	})

	It("are accepted as written by server-side apply and by a strict create, and refused with a misspelled field", func(ctx SpecContext) {
		sent := 0
		for _, d := range docs {
			if d.Object.GetKind() == "Kustomization" {
				continue
			}
			obj := retarget(d.Object, ns, testNS)
			what := fmt.Sprintf("%s: %s %s", d.File, obj.GetKind(), obj.GetName())
			Expect(apply(ctx, c, obj, client.DryRunAll)).To(Succeed(), what)
			// kubectl apply without --server-side creates, strictly.
			Expect(c.Create(ctx, obj, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))).To(Succeed(), what)
			sent++
		}
		Expect(sent).To(Equal(len(docs) - 1))
		report("deploy/: %d objects accepted by server-side apply and by a strict create (dry run)", sent)

		// The same Deployment with one letter's case changed.
		var deployment manifests.Doc
		for _, d := range docs {
			if d.Object.GetKind() == "Deployment" {
				deployment = d
			}
		}
		typo := bytes.Replace(deployment.YAML, []byte("readOnlyRootFilesystem:"), []byte("readOnlyRootFileSystem:"), 1)
		Expect(typo).NotTo(Equal(deployment.YAML))
		decoded, err := manifests.Decode(typo)
		Expect(err).NotTo(HaveOccurred())
		obj := retarget(decoded, ns, testNS)
		// Server-side apply refuses a field not in the schema whatever
		// the field validation (Strict, Warn or Ignore alike).
		err = apply(ctx, c, obj, client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring(`securityContext.readOnlyRootFileSystem: field not declared in schema`)))
		// A create refuses it under Strict only: Ignore drops it.
		err = c.Create(ctx, obj.DeepCopy(), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
		Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "a strict create of a misspelled field: %v", err)
		Expect(err).To(MatchError(ContainSubstring(`unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`)))
		Expect(c.Create(ctx, obj.DeepCopy(), client.DryRunAll, client.FieldValidation(metav1.FieldValidationIgnore))).To(Succeed())
	})

	It("run a pod the namespace's Pod Security level admits, and it refuses the pod without its capabilities dropped", func(ctx SpecContext) {
		var dep appsv1.Deployment
		Expect(manifests.One(docs, "Deployment", &dep)).To(Succeed())
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: dep.Name, Namespace: testNS, Labels: dep.Spec.Template.Labels},
			Spec:       dep.Spec.Template.Spec,
		}
		dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}
		_, err := admin.CoreV1().Pods(testNS).Create(ctx, pod, dryRun)
		Expect(err).NotTo(HaveOccurred())

		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].SecurityContext = pod.Spec.Containers[i].SecurityContext.DeepCopy()
			pod.Spec.Containers[i].SecurityContext.Capabilities = nil
			_, err = admin.CoreV1().Pods(testNS).Create(ctx, pod, dryRun)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a pod whose %s keeps its capabilities: %v", pod.Spec.Containers[i].Name, err)
			Expect(err.Error()).To(ContainSubstring("violates PodSecurity"))
			pod.Spec = *dep.Spec.Template.Spec.DeepCopy()
		}
	})

	It("let the sidecar's ServiceAccount create TokenReviews and read the issuer's keys, and no more", func(ctx SpecContext) {
		var sa corev1.ServiceAccount
		Expect(manifests.One(docs, "ServiceAccount", &sa)).To(Succeed())
		user := fmt.Sprintf("system:serviceaccount:%s:%s", testNS, sa.Name)
		allowed := func(ctx context.Context, attrs authzv1.SubjectAccessReviewSpec) (bool, error) {
			attrs.User = user
			attrs.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + testNS, "system:authenticated"}
			r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: attrs}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			return r.Status.Allowed, nil
		}
		tokenReviews := authzv1.SubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}}
		Expect(allowed(ctx, tokenReviews)).To(BeFalse(), "TokenReviews allowed before deploy/'s RBAC is applied")

		// The RBAC for real, under names of this spec's: the bindings are
		// cluster-wide.
		suffix := "-" + testNS
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
			for _, u := range manifests.Find(docs, kind) {
				obj := retarget(u, ns, testNS)
				obj.SetName(obj.GetName() + suffix)
				if kind == "ClusterRoleBinding" {
					roleRef, _, _ := unstructured.NestedString(obj.Object, "roleRef", "name")
					Expect(unstructured.SetNestedField(obj.Object, roleRef+suffix, "roleRef", "name")).To(Succeed())
				}
				Expect(apply(ctx, c, obj)).To(Succeed())
				DeferCleanup(func(ctx SpecContext) { Expect(c.Delete(ctx, obj)).To(Succeed()) })
			}
		}
		Eventually(allowed).WithContext(ctx).WithArguments(tokenReviews).WithTimeout(30 * time.Second).Should(BeTrue())

		Expect(allowed(ctx, authzv1.SubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"}})).To(BeFalse(),
			"SubjectAccessReviews are for --authorize only, which deploy/ does not give")
		Expect(allowed(ctx, authzv1.SubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: testNS, Resource: "secrets", Verb: "get"}})).To(BeFalse())
		for _, path := range []string{"/.well-known/openid-configuration", "/openid/v1/jwks"} {
			Expect(allowed(ctx, authzv1.SubjectAccessReviewSpec{NonResourceAttributes: &authzv1.NonResourceAttributes{
				Path: path, Verb: "get"}})).To(BeTrue(), "the issuer's %s, by the default system:service-account-issuer-discovery", path)
		}
	})
})

// deploy/dashboard is applied for real by the browser specs, which bind
// each of its ClusterRoles in turn; here, the rest.
var _ = Describe("The manifests under deploy/dashboard", func() {
	It("are accepted as written by a strict create, and kustomize lists every file but the classic alternative", func(ctx SpecContext) {
		docs, err := manifests.Read("../deploy/dashboard")
		Expect(err).NotTo(HaveOccurred())
		c, err := client.New(cluster.Admin, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		// Namespaced objects go to a namespace of the spec's, which exists.
		testNS := newNamespace("deploy-dashboard")
		var files []string
		for _, d := range docs {
			f := filepath.Base(d.File)
			if d.Object.GetKind() == "Kustomization" {
				continue
			}
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
			obj := retarget(d.Object, deployedDashboardNamespace, testNS)
			Expect(c.Create(ctx, obj, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))).To(Succeed(), "%s: %s %s", f, obj.GetKind(), obj.GetName())
		}
		var kustomization struct {
			Resources []string `json:"resources"`
		}
		ks := manifests.Find(docs, "Kustomization")
		Expect(ks).To(HaveLen(1))
		Expect(runtimeFrom(ks[0], &kustomization)).To(Succeed())
		Expect(append(kustomization.Resources, "impersonate-classic.yaml")).To(ConsistOf(files))
	})
})

// retarget returns a copy of obj as it is sent to namespace to instead of
// from: its own namespace, and its ServiceAccount subjects' if it is a
// binding.
func retarget(obj *unstructured.Unstructured, from, to string) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	if obj.GetNamespace() == from {
		obj.SetNamespace(to)
	}
	subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
	for _, s := range subjects {
		if s, ok := s.(map[string]any); ok && s["kind"] == "ServiceAccount" && s["namespace"] == from {
			s["namespace"] = to
		}
	}
	if subjects != nil {
		Expect(unstructured.SetNestedSlice(obj.Object, subjects, "subjects")).To(Succeed())
	}
	return obj
}

// apply sends obj by server-side apply with strict field validation: a
// field the API server does not know is an error, not dropped.
func apply(ctx context.Context, c client.Client, obj *unstructured.Unstructured, opts ...client.PatchOption) error {
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	opts = append([]client.PatchOption{client.FieldOwner("authvault-deploy-test"), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationStrict)}, opts...)
	return c.Patch(ctx, obj.DeepCopy(), client.RawPatch(types.ApplyPatchType, data), opts...)
}

// runtimeFrom decodes an object that is no Kubernetes type (a
// kustomization) through JSON.
func runtimeFrom(u *unstructured.Unstructured, out any) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}
