package main

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/authvault/authvault/testkit/manifests"
)

// deploy/addon-proxy/apiservice as the API server and addon-proxy read
// it: the APIService names the Service and its port, its group is the
// one --apiservice gives, the proxy's ServiceAccount may read the
// requestheader ConfigMap, and the patched flags parse.
func TestDeployedAPIService(t *testing.T) {
	docs, err := manifests.Read(deployDir + "/apiservice")
	if err != nil {
		t.Fatal(err)
	}
	apiServices := manifests.Find(docs, "APIService")
	if len(apiServices) != 1 {
		t.Fatalf("%d APIServices, want 1", len(apiServices))
	}
	spec := apiServices[0].Object["spec"].(map[string]any)
	service := spec["service"].(map[string]any)
	parent, err := manifests.Read(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := manifests.One(parent, "Service", &svc); err != nil {
		t.Fatal(err)
	}
	if service["name"] != svc.Name || service["namespace"] != svc.Namespace || service["port"] != int64(svc.Spec.Ports[0].Port) {
		t.Errorf("the APIService names %v, want the Service %s/%s port %d", service, svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
	}
	if want := "v1." + spec["group"].(string); apiServices[0].GetName() != want || spec["version"] != "v1" {
		t.Errorf("APIService %s for %v/%v: its name must be VERSION.GROUP", apiServices[0].GetName(), spec["group"], spec["version"])
	}

	var binding rbacv1.RoleBinding
	if err := manifests.One(docs, "RoleBinding", &binding); err != nil {
		t.Fatal(err)
	}
	sidecar, dep := deployedSidecar(t)
	if binding.Namespace != "kube-system" || binding.RoleRef.Name != "extension-apiserver-authentication-reader" ||
		len(binding.Subjects) != 1 || binding.Subjects[0].Name != dep.Spec.Template.Spec.ServiceAccountName || binding.Subjects[0].Namespace != dep.Namespace {
		t.Errorf("RoleBinding %s/%s: %+v %+v, want the reader Role for the Deployment's ServiceAccount", binding.Namespace, binding.Name, binding.RoleRef, binding.Subjects)
	}

	// The kustomization's patch adds --apiservice to the sidecar.
	var k struct {
		Patches []struct{ Patch string }
	}
	raw, err := os.ReadFile(deployDir + "/apiservice/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &k); err != nil || len(k.Patches) != 1 {
		t.Fatalf("kustomization: %v, %d patches", err, len(k.Patches))
	}
	var ops []struct{ Op, Path, Value string }
	if err := yaml.Unmarshal([]byte(k.Patches[0].Patch), &ops); err != nil || len(ops) != 1 {
		t.Fatalf("patch: %v %+v", err, ops)
	}
	containers := dep.Spec.Template.Spec.Containers
	if !strings.HasPrefix(ops[0].Path, "/spec/template/spec/containers/") || containers[1].Name != "addon-proxy" || ops[0].Path != "/spec/template/spec/containers/1/args/-" {
		t.Fatalf("the patch adds to %s, not the sidecar's args", ops[0].Path)
	}
	fs := flag.NewFlagSet("addon-proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := parseFlags(fs, append(append([]string{}, sidecar.Args...), ops[0].Value))
	if err != nil {
		t.Fatalf("the patched sidecar's flags: %v", err)
	}
	if c.apiService.Group != spec["group"] || c.auth.FrontProxy == nil {
		t.Errorf("--apiservice %v, front proxy %v; want the APIService's group and the ConfigMap", c.apiService, c.auth.FrontProxy)
	}
}
