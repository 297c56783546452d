// Package manifests reads the Kubernetes objects under deploy/, for the
// tests that check them: every YAML document of every .yaml file, as the
// API server would get it.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Doc is one YAML document of a manifest file.
type Doc struct {
	File string // the file's path, as given to Read joined with its name
	YAML []byte // the document as written
	// Object is the document decoded; a kustomization.yaml is one too,
	// of kind Kustomization.
	Object *unstructured.Unstructured
}

// Read returns the documents of every .yaml file in dir (not its
// subdirectories), in the order of the files' names and of the documents
// in them. A document that is not valid YAML, holds a key twice, or lacks
// apiVersion or kind is an error; an empty one is skipped.
func Read(dir string) ([]Doc, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("manifests: no .yaml file in %s", dir)
	}
	var docs []Doc
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("manifests: %s: %w", f, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, err := Decode(doc)
			if err != nil {
				return nil, fmt.Errorf("manifests: %s: %w", f, err)
			}
			docs = append(docs, Doc{File: f, YAML: doc, Object: obj})
		}
	}
	return docs, nil
}

// Decode decodes one YAML document, refusing a key given twice.
func Decode(doc []byte) (*unstructured.Unstructured, error) {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return obj, nil
}

// Find returns the objects of docs of this kind.
func Find(docs []Doc, kind string) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		if d.Object.GetKind() == kind {
			objs = append(objs, d.Object)
		}
	}
	return objs
}

// One returns the one object of docs of this kind, converted to out (a
// pointer to a typed object, such as *appsv1.Deployment); none or more
// than one is an error.
func One(docs []Doc, kind string, out any) error {
	objs := Find(docs, kind)
	if len(objs) != 1 {
		return fmt.Errorf("manifests: %d objects of kind %s, want 1", len(objs), kind)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[0].Object, out, true)
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range strings.SplitSeq(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}
