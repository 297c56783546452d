package absent

import (
	"errors"
	"fmt"
	"testing"
)

// What finds the words of a handler's nothing through wrapping, and tells
// any other error apart.
func TestWhat(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want string
		ok   bool
	}{
		{"bare", New("no in-cluster service account"), "no in-cluster service account", true},
		{"wrapped", fmt.Errorf("piggyback: %w", New("no --kubeconfig")), "no --kubeconfig", true},
		{"another error", errors.New("no such file or directory"), "", false},
		{"nil", nil, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := What(tt.err); got != tt.want || ok != tt.ok {
				t.Errorf("What(%v) = %q, %t; want %q, %t", tt.err, got, ok, tt.want, tt.ok)
			}
		})
	}
}
