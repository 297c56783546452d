package main

import (
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/authvault/authvault/testkit/manifests"
)

const deployDir = "../../deploy/addon-proxy"

// deployedSidecar returns the addon-proxy container of deploy/'s
// Deployment, and the Deployment.
func deployedSidecar(t *testing.T) (corev1.Container, *appsv1.Deployment) {
	t.Helper()
	docs, err := manifests.Read(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := manifests.One(docs, "Deployment", &dep); err != nil {
		t.Fatal(err)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "addon-proxy" {
			return c, &dep
		}
	}
	t.Fatalf("deploy/'s Deployment %s has no container addon-proxy", dep.Name)
	return corev1.Container{}, nil
}

// The sidecar of deploy/ as addon-proxy reads it: its flags parse, its
// audience is the Service's name, its upstream is in the pod, its ports
// and files are those the manifests give it, and its probes ask what the
// ops server serves.
func TestDeployedSidecar(t *testing.T) {
	docs, err := manifests.Read(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := manifests.One(docs, "Service", &svc); err != nil {
		t.Fatal(err)
	}
	sidecar, dep := deployedSidecar(t)
	fs := flag.NewFlagSet("addon-proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := parseFlags(fs, sidecar.Args)
	if err != nil {
		t.Fatalf("addon-proxy %s: %v", strings.Join(sidecar.Args, " "), err)
	}
	if len(sidecar.Command) > 0 {
		t.Errorf("the sidecar's command is %q: it would replace the image's entrypoint", sidecar.Command)
	}

	if want := svc.Name + "." + svc.Namespace + ".svc"; !slices.Contains(c.auth.Audiences, want) {
		t.Errorf("--audience %q, want the Service's name %s among them", c.auth.Audiences, want)
	}
	if ip := net.ParseIP(c.upstream.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Errorf("--upstream %s is not on a loopback address: the service would be reachable around the proxy", c.upstream.Redacted())
	}

	// The Service reaches --listen, and only the sidecar.
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("the Service has %d ports, want the proxy's one", len(svc.Spec.Ports))
	}
	if got, want := portOf(t, sidecar, svc.Spec.Ports[0].TargetPort), listenPort(t, c.listen); got != want {
		t.Errorf("the Service's target port %s is %d, --listen's %d", svc.Spec.Ports[0].TargetPort.String(), got, want)
	}
	for _, other := range dep.Spec.Template.Spec.Containers {
		for _, p := range other.Ports {
			if other.Name != sidecar.Name && (p.Name == svc.Spec.Ports[0].TargetPort.StrVal || p.ContainerPort == svc.Spec.Ports[0].TargetPort.IntVal) {
				t.Errorf("the Service's target port is %s's too", other.Name)
			}
		}
	}
	if c.certFile == "" {
		t.Error("the sidecar serves plain HTTP: no --tls-cert-file")
	}
	for _, f := range []string{c.certFile, c.keyFile} {
		if !fromSecret(dep.Spec.Template.Spec, sidecar, f) {
			t.Errorf("%s is in no volume from a Secret mounted in the sidecar", f)
		}
	}

	// The probes ask the ops server, at paths it serves.
	mux, ok := opsHandler(nil, prometheus.NewRegistry()).(*http.ServeMux)
	if !ok {
		t.Fatal("opsHandler is no ServeMux to look paths up in")
	}
	for name, probe := range map[string]*corev1.Probe{"liveness": sidecar.LivenessProbe, "readiness": sidecar.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("the sidecar has no HTTP %s probe", name)
			continue
		}
		if got, want := portOf(t, sidecar, probe.HTTPGet.Port), listenPort(t, c.opsListen); got != want {
			t.Errorf("the %s probe asks port %d, --ops-listen is %d", name, got, want)
		}
		if _, pattern := mux.Handler(httptest.NewRequest(http.MethodGet, probe.HTTPGet.Path, nil)); pattern == "" {
			t.Errorf("the %s probe asks %s, which the ops server does not serve", name, probe.HTTPGet.Path)
		}
	}
	if _, pattern := mux.Handler(httptest.NewRequest(http.MethodGet, "/livez", nil)); pattern != "" {
		t.Errorf("the ops server serves /livez as %s: the probe check would pass any path", pattern)
	}

	// The image is the one the Dockerfile says to build, and so do the
	// docs wherever they build it.
	tag := dockerBuildTag(t, "Dockerfile")
	if sidecar.Image != tag {
		t.Errorf("the sidecar's image is %s, the Dockerfile builds %s", sidecar.Image, tag)
	}
	docsFiles, _ := filepath.Glob("../../docs/*.md")
	for _, f := range append(docsFiles, "../../README.md") {
		if got := dockerBuildTag(t, f); got != "" && got != tag {
			t.Errorf("%s builds the image as %s, deploy/ runs %s", f, got, tag)
		}
	}
}

// dockerBuildTag is the -t of the docker build of cmd/addon-proxy/Dockerfile
// in file, or "" when it has none; two different ones are an error.
func dockerBuildTag(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var tag string
	for line := range strings.SplitSeq(string(data), "\n") {
		i := strings.Index(line, "docker build ")
		if i < 0 || !strings.Contains(line, "cmd/addon-proxy/Dockerfile") {
			continue
		}
		words := strings.Fields(strings.Trim(line[i:], "`"))
		for j, w := range words {
			var got string
			if (w == "-t" || w == "--tag") && j+1 < len(words) {
				got = words[j+1]
			} else if v, ok := strings.CutPrefix(w, "--tag="); ok {
				got = v
			}
			if got == "" {
				continue
			}
			if tag != "" && got != tag {
				t.Errorf("%s builds the image as %s and as %s", file, tag, got)
			}
			tag = got
		}
	}
	return tag
}

// portOf resolves a probe's or a Service's port in c.
func portOf(t *testing.T, c corev1.Container, p intstr.IntOrString) int {
	t.Helper()
	if p.Type == intstr.Int {
		return int(p.IntVal)
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	t.Errorf("the port %s is none of %s's", p.StrVal, c.Name)
	return -1
}

func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	return n
}

// fromSecret tells whether file lies under a mount in c of a volume of
// spec whose source is a Secret.
func fromSecret(spec corev1.PodSpec, c corev1.Container, file string) bool {
	for _, m := range c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, file)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return true
			}
		}
	}
	return false
}
