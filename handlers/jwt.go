package handlers

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// jwtExpiry returns the exp claim of token when it is a JWT. The signature
// is not checked: the server does that; the claim only says when to read the
// token again.
func jwtExpiry(token string) (time.Time, bool) {
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
