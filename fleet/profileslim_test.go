package fleet

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The watch's cache keeps of a profile what the provider file can use: the
// cluster data of the providers the file names, and only the names of the
// others, so that whoever writes profiles cannot make this process hold
// megabytes per profile of data it never reads (10,000 profiles of a
// megabyte each would be 10 GB). What the watch decides, and what it logs,
// is the same from the slim profile as from the whole one.
func TestProfileTransformKeepsWhatTheFileCanUse(t *testing.T) {
	providers := []AccessProvider{{Name: "test", ExecConfig: &clientcmdapi.ExecConfig{Command: "p", APIVersion: execAPIVersionV1}}}
	transform := profileTransform(providers)
	big := strings.Repeat("A", 1<<20)
	small := map[string]any{"server": "https://test.example", "certificate-authority-data": "Q0E=",
		"extensions": []any{map[string]any{"name": ExecExtension, "extension": map[string]any{"region": "eu"}}}}
	bulky := map[string]any{"server": "https://other.example", "certificate-authority-data": big}

	served := profile("inv", "served", "unused", bulky, "test", small)
	served.Object["status"].(map[string]any)["credentialProviders"] = []any{
		map[string]any{"name": "old-unused", "cluster": bulky},
		map[string]any{"name": "test", "cluster": bulky},
	}
	var others []any
	for i := range 12 {
		others = append(others, fmt.Sprintf("other-%02d-%s", i, strings.Repeat("x", 70)), bulky)
	}
	refused := profile("inv", "refused", others...)

	for _, u := range []*unstructured.Unstructured{served, refused} {
		out, err := transform(u.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		slim := out.(*unstructured.Unstructured)
		b, _ := json.Marshal(slim.Object)
		if len(b) > 4<<10 {
			t.Errorf("%s: the cache keeps %d bytes of it, want under 4 KiB", u.GetName(), len(b))
		}
		again, _ := transform(slim.DeepCopy())
		if b2, _ := json.Marshal(again.(*unstructured.Unstructured).Object); string(b2) != string(b) {
			t.Errorf("%s: the transform is not idempotent", u.GetName())
		}
		want, wantErr := accessFor(u, providers)
		got, gotErr := accessFor(slim, providers)
		switch {
		case fmt.Sprint(gotErr) != fmt.Sprint(wantErr):
			t.Errorf("%s: from the slim profile %v, from the whole one %v", u.GetName(), gotErr, wantErr)
		case want != nil && (got.digest != want.digest || got.cluster.Server != want.cluster.Server):
			t.Errorf("%s: from the slim profile %s (digest %x), from the whole one %s (digest %x)",
				u.GetName(), got.cluster.Server, got.digest[:4], want.cluster.Server, want.digest[:4])
		}
	}
}
