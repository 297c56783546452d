package kubeconf

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// TokenExpiry is the exp claim of token when it is a JWT: when the server
// will stop taking it. Neither the signature nor any other claim is
// checked (the server does that): the claim only says when to read the
// token's source again. A token that is no JWT, or whose exp is absent, no
// number or out of range (not after the epoch, beyond 2^40 s), has none.
func TokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"` // a NumericDate: seconds since the epoch
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	if exp := *claims.Exp; exp > 0 && exp < 1<<40 {
		return time.Unix(int64(exp), 0), true
	}
	return time.Time{}, false
}
