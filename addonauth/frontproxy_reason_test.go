package addonauth

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Once the ConfigMap can be read, the reason front-proxy callers get 503
// is the one now true: an operator who bound the Role and sees "cannot be
// read: forbidden" still in the log would look for the wrong fault.
func TestFrontProxyMissingConfigMapIsReportedOnceReadable(t *testing.T) {
	client := fake.NewClientset()
	forbid := forbidLists(client)
	s := newFrontSetup(t, FrontProxy{}, Options{frontProxyClient: client})
	waitFor(t, "the log to say it cannot be read", func() bool { return strings.Contains(s.log(), "cannot be read") })
	forbid.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.log(), "does not exist") {
		if time.Now().After(deadline) {
			st := s.auth.front.current.Load()
			t.Fatalf("10s after the ConfigMap became readable (and missing), the state is %v; log:\n%s", st.err, s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A missing ConfigMap's reason gives way to the outage that follows it.
func TestFrontProxyReasonFollowsAnOutageOfAMissingConfigMap(t *testing.T) {
	client := fake.NewClientset()
	var forbid atomic.Bool
	w := watch.NewFake()
	deny := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "extension-apiserver-authentication", nil)
	client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if forbid.Load() {
			return true, nil, deny
		}
		return false, nil, nil
	})
	client.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		if forbid.Load() {
			return true, nil, deny
		}
		return true, w, nil
	})
	s := newFrontSetup(t, FrontProxy{}, Options{frontProxyClient: client})
	waitFor(t, "the log to say it does not exist", func() bool { return strings.Contains(s.log(), "does not exist") })
	forbid.Store(true)
	w.Stop() // the watch ends; the next watch and list are forbidden
	waitFor(t, "the log to say, after that, that it cannot be read", func() bool {
		l := s.log()
		return strings.Contains(l[strings.LastIndex(l, "does not exist"):], "cannot be read")
	})
}

// forbidLists makes client's lists of ConfigMaps answer 403 while the flag
// it returns is set (it starts set), as the API server does for a proxy
// without the reader Role.
func forbidLists(client *fake.Clientset) *atomic.Bool {
	var forbid atomic.Bool
	forbid.Store(true)
	client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if forbid.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "extension-apiserver-authentication", nil)
		}
		return false, nil, nil
	})
	return &forbid
}
