package hub

import (
	"strings"
	"testing"
)

// The leak scan finds an issued token wherever a side writes it, however
// the text around it runs on, and any ServiceAccount token (a JWT: the
// addon callers' TokenRequest tokens, which the hub does not issue); it
// says where, never the secret.
func TestLeaks(t *testing.T) {
	const tok = "av-00112233445566778899aabbccddeeff"
	const jwt = "eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9.eyJhdWQiOlsiYWRkb24uc29hay5zdmMiXX0.c2lnbmF0dXJl"
	h := &Hub{tokens: map[string]bool{tok: true}}
	tests := []struct {
		name, text string
		hits       int
	}{
		{"nothing", "GET /api 200 in 3ms", 0},
		{"another issuer's token", "Bearer av-ffffffffffffffffffffffffffffffff", 0},
		{"the token", "Authorization: Bearer " + tok + "\n", 1},
		{"its first characters", "token av-00112233...", 1},
		{"hex right after it", "token=" + tok + "0badc0de", 1},
		{"a ServiceAccount token", `{"msg":"caller","token":"` + jwt + `"}`, 1},
		{"a JWT's header and claims alone", "eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9.eyJhdWQiOlsiYWRkb24uc29hay5zdmMiXX0", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := h.Leaks("side.log", []byte(tt.text))
			if len(got) != tt.hits {
				t.Fatalf("Leaks(%q) = %q, want %d hits", tt.text, got, tt.hits)
			}
			for _, where := range got {
				if strings.Contains(where, "00112233") || strings.Contains(where, "eyJ") || !strings.HasPrefix(where, "side.log: ") {
					t.Errorf("Leaks says %q: want where, never the secret", where)
				}
			}
		})
	}
}
