package kubeconf

import "testing"

// FuzzJWTExpiry: reading a token's exp claim must not panic, and what it
// returns is a time after the epoch.
func FuzzJWTExpiry(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE4OTM0NTYwMDB9.c2ln")
	f.Add("a.b.c")
	f.Add("opaque-token")
	f.Fuzz(func(t *testing.T, token string) {
		if exp, ok := TokenExpiry(token); ok && exp.Unix() <= 0 {
			t.Errorf("TokenExpiry(%q) = %v, before the epoch", token, exp)
		}
	})
}

func TestJWTExpiry(t *testing.T) {
	tests := map[string]bool{
		unsignedJWT(`{"exp":1893456000}`):                   true,
		unsignedJWT(`{"exp":1.8934560e9}`):                  true,
		unsignedJWT(`{"exp":"1893456000"}`):                 false,
		unsignedJWT(`{"exp":-5}`):                           false,
		unsignedJWT(`not json`):                             false,
		unsignedJWT(`{"exp":253402300799}`):                 true,  // the year 9999
		unsignedJWT(`{"exp":1099511627776}`):                false, // 2^40 s
		unsignedJWT(`{"exp":0}`):                            false,
		unsignedJWT(`{"exp":null}`):                         false,
		unsignedJWT(`{"exp":1e400}`):                        false,
		unsignedJWT(`{"exp":[1893456000]}`):                 false,
		unsignedJWT(`{"exp":{"$numberLong":"1893456000"}}`): false,
		"a.b.c":                    false,
		"opaque.token.with.4parts": false,
		"eyJleHAiOjE4OTM0NTYwMDB9.eyJleHAiOjE4OTM0NTYwMDB9": false,
		"two.parts": false,
		"":          false,
	}
	for token, want := range tests {
		if _, ok := TokenExpiry(token); ok != want {
			t.Errorf("TokenExpiry(%q) ok = %v, want %v", token, ok, want)
		}
	}
}
