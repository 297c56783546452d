package shard

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Lease's name holds no character of the identity, which may be any
// string, and stays the same across the replica's restarts.
func TestLeaseNamesAreValidWhateverTheIdentity(t *testing.T) {
	a, b := LeaseName("g", "pod-0"), LeaseName("g", "Pod 0/with:odd chars")
	if a == b || a != LeaseName("g", "pod-0") || !strings.HasPrefix(a, "g-") || len(a) != len("g-")+16 {
		t.Errorf("lease names %q and %q", a, b)
	}
	if strings.ContainsAny(b, " /:P") {
		t.Errorf("lease name %q holds the identity's characters", b)
	}
	for _, name := range []string{a, b, "g-0123456789abcdef"} {
		if !inGroup("g", name) {
			t.Errorf("%q is not found as a Lease of group g", name)
		}
	}
	for _, name := range []string{"g-0123456789ABCDEF", "g-0123456789abcde", "gg-0123456789abcdef", LeaseName("g-x", "a")} {
		if inGroup("g", name) {
			t.Errorf("%q is found as a Lease of group g", name)
		}
	}
}

// record never panics on a peer's garbage, and reads it as unreadable.
func TestRecordOfGarbageNeverPanics(t *testing.T) {
	s := &Driver{lease: LeaseName("g", "self"), cfg: Config{Group: "g"}}
	for _, tc := range []struct {
		ann      map[string]string
		readable bool
	}{
		{map[string]string{ViewAnnotation: "{"}, false},
		{map[string]string{ViewAnnotation: `{"a":1}`}, false},
		{map[string]string{ViewAnnotation: `[1,2]`}, false},
		{map[string]string{ViewAnnotation: `null`}, true},
		{map[string]string{ViewAnnotation: `[]`, rulesAnnotation: "x"}, false},
		{map[string]string{ViewAnnotation: `[]`, rulesAnnotation: "-3"}, false},
		{map[string]string{ViewAnnotation: `[]`, durationAnnotation: "-5s"}, true},
		{map[string]string{ViewAnnotation: `[]`, durationAnnotation: "99999999999h"}, true},
		{map[string]string{ViewAnnotation: "\xff\xfe"}, false},
		{map[string]string{incarnationAnnotation: "x"}, false}, // its view taken off by hand: it may claim anything
	} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("g", "x"), Annotations: tc.ann}}
		r, ok := s.record(l)
		if !ok || r.readable != tc.readable || r.duration < 0 {
			t.Errorf("%q: ok %v readable %v (want %v) duration %v", tc.ann, ok, r.readable, tc.readable, r.duration)
		}
	}
	for _, name := range []string{LeaseName("g", "self"), "g-x", LeaseName("g-old", "x"), "g-0123456789ABCDEF", "other-0123456789abcdef"} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{ViewAnnotation: "[]"}}}
		if _, ok := s.record(l); ok {
			t.Errorf("the Lease %s is read as a peer's of group g", name)
		}
	}
}
