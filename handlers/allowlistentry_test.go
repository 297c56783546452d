package handlers

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// The allowlist entry's command field is found in every client-go this
// module supports, under either name.
func TestCommandField(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  reflect.Type
		want string // the field's name; "" for an error
	}{
		{"client-go's", reflect.TypeFor[clientcmdapi.AllowlistEntry](), ""},
		{"v0.35's", reflect.TypeFor[struct{ Name string }](), "Name"},
		{"v0.36's", reflect.TypeFor[struct{ Command string }](), "Command"},
		{"both", reflect.TypeFor[struct{ Name, Command string }](), "Command"},
		{"neither", reflect.TypeFor[struct{ Path string }](), ""},
		{"not a string", reflect.TypeFor[struct{ Command []string }](), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			index, err := commandField(tc.typ)
			if tc.name == "client-go's" {
				if err != nil {
					t.Fatalf("this module's client-go: %v", err)
				}
				return
			}
			switch {
			case tc.want == "" && err == nil:
				t.Errorf("commandField(%v) = %v, want an error", tc.typ, index)
			case tc.want != "" && err != nil:
				t.Errorf("commandField(%v): %v", tc.typ, err)
			case tc.want != "" && tc.typ.FieldByIndex(index).Name != tc.want:
				t.Errorf("commandField(%v) = %s, want %s", tc.typ, tc.typ.FieldByIndex(index).Name, tc.want)
			}
		})
	}
}

// A client-go whose allowlist entry cannot be read (a field renamed or
// retyped again) is no crash when the package loads, as a panic in its
// initialization would be in every program that imports handlers: an
// allowlist policy is refused where it is used, with a permanent error that
// says why, and the other policies work.
func TestUnreadableAllowlistEntryIsAnErrorAtUse(t *testing.T) {
	saved := allowlistCommand
	t.Cleanup(func() { allowlistCommand = saved })
	allowlistCommand = func() ([]int, error) { return commandField(reflect.TypeFor[struct{ Command []string }]()) }

	policy := Allowlist("sh") // no panic
	err := policyAllows(policy, "sh")
	const want = `handlers: exec plugin "sh" is not allowed: plugin policy Allowlist cannot be read with this client-go: client-go's struct { Command []string } has no string Command or Name field`
	if err == nil || err.Error() != want {
		t.Fatalf("an allowlist that cannot be read: %v, want %s", err, want)
	}
	if perm := (*login.PermanentError)(nil); !errors.As(err, &perm) {
		t.Errorf("the error is not permanent: %v", err)
	}
	native := AllowNative(DenyAll, "eks")
	if err := nativeAllowed(native, Native{Name: "eks"}, "aws"); err == nil || !strings.Contains(err.Error(), "no string Command or Name field") {
		t.Errorf("a native login under an allowlist that cannot be read: %v", err)
	}
	for _, p := range []PluginPolicy{AllowAll, {}} {
		if err := policyAllows(p, "sh"); err != nil {
			t.Errorf("policy %q: %v", p.PolicyType, err)
		}
	}
	if err := policyAllows(DenyAll, "sh"); err == nil || strings.Contains(err.Error(), "Command or Name") {
		t.Errorf("DenyAll: %v", err)
	}
}
