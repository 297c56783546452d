package federation

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Token is a token the hub minted for its ServiceAccount, for one member:
// what a Provider turns into the member's credential. Its value is a
// secret: every printed form (fmt's verbs, logr, JSON) leaves it out.
type Token struct {
	value *string // behind a pointer: fmt prints a field's pointer as an address, never what it points to
	// Expiration is when the hub says the token expires.
	Expiration time.Time
	// Audiences are those it was minted for: the member's.
	Audiences []string
	// KeyID names the hub's key that signed it (the JWT's kid), for the
	// log: a member rejects a key it has not fetched yet.
	KeyID string
}

// Value is the token itself, to present to the member or exchange.
func (t Token) Value() string {
	if t.value == nil {
		return ""
	}
	return *t.value
}

// String describes the token without its value.
func (t Token) String() string {
	return fmt.Sprintf("federation.Token{audiences: [%s], key: %q, expires: %s, value: <redacted>}",
		strings.Join(t.Audiences, " "), t.KeyID, t.Expiration.UTC().Format(time.RFC3339))
}

// GoString is String: %#v prints no secret either.
func (t Token) GoString() string { return t.String() }

// Format prints String for every verb.
func (t Token) Format(f fmt.State, _ rune) { fmt.Fprint(f, t.String()) }

// MarshalJSON writes the token without its value.
func (t Token) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Audiences []string  `json:"audiences"`
		KeyID     string    `json:"key"`
		Expires   time.Time `json:"expires"`
		Value     string    `json:"value"`
	}{t.Audiences, t.KeyID, t.Expiration, "<redacted>"})
}

// MarshalLog is what logr prints for it.
func (t Token) MarshalLog() any { return t.String() }
