package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "# only a comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n# a comment after\n")
	write("b.yml", "apiVersion: v1\nkind: Secret\n") // not .yaml: not read
	docs, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.Object.GetKind()+"/"+d.Object.GetName())
	}
	if want := "ServiceAccount/a Service/b"; strings.Join(got, " ") != want {
		t.Errorf("Read = %q, want %s", got, want)
	}

	for name, text := range map[string]string{
		"a key twice": "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nmetadata: {name: b}\n",
		"no kind":     "apiVersion: v1\nmetadata: {name: a}\n",
		"not YAML":    "apiVersion: v1\nkind: [\n",
	} {
		write("a.yaml", text)
		if docs, err := Read(dir); err == nil {
			t.Errorf("%s: Read = %d documents, want an error", name, len(docs))
		}
	}
	if _, err := Read(t.TempDir()); err == nil {
		t.Error("Read of an empty directory = nil error, want one")
	}
}

// One converts strictly: a field the type lacks is an error, not dropped.
func TestOne(t *testing.T) {
	obj, err := Decode([]byte("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\nautomountServiceAccountToken: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	var sa corev1.ServiceAccount
	if err := One([]Doc{{Object: obj}}, "ServiceAccount", &sa); err != nil || sa.Name != "a" || sa.AutomountServiceAccountToken == nil {
		t.Errorf("One = %v, %+v; want the ServiceAccount a", err, sa)
	}
	if err := One([]Doc{{Object: obj}, {Object: obj}}, "ServiceAccount", &sa); err == nil {
		t.Error("One of two = nil error, want one")
	}
	obj, err = Decode([]byte("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\nautomountServiceAccountTokens: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := One([]Doc{{Object: obj}}, "ServiceAccount", &sa); err == nil || !strings.Contains(err.Error(), "automountServiceAccountTokens") {
		t.Errorf("One with a misspelled field = %v, want an error naming it", err)
	}
}
