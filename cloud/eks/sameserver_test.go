package eks

import "testing"

// sameServer takes a server for the cluster's endpoint only when it is that
// URL up to what does not change where a request goes: the case of the
// scheme and host, an explicit port 443, a bare trailing slash.
func TestSameServer(t *testing.T) {
	const endpoint = "https://0123ABCD.gr7.eu-west-1.eks.amazonaws.com"
	for _, tt := range []struct {
		server string
		want   bool
	}{
		{endpoint, true},
		{"HTTPS://0123abcd.GR7.eu-west-1.eks.amazonaws.com", true},
		{endpoint + ":443", true},
		{endpoint + "/", true},
		{"http://0123ABCD.gr7.eu-west-1.eks.amazonaws.com", false},
		{endpoint + ":6443", false},
		{endpoint + "/api", false},
		{endpoint + "?x=1", false},
		{"https://user@0123ABCD.gr7.eu-west-1.eks.amazonaws.com", false},
		{"https://0123ABCD.gr7.eu-west-1.eks.amazonaws.com.attacker.example", false},
		{"https://0123ABCD.gr7.eu-west-1.eks.amazonaws.com.", false},
		{"https://10.0.0.1", false},
		// Unicode case folding is not DNS's: U+212A KELVIN SIGN folds to
		// k, U+017F LONG S to s, and neither is a name EKS gives.
		{"https://0123ABCD.gr7.eu-west-1.e\u212As.amazonaws.com", false},
		{"https://0123ABCD.gr7.eu-west-1.ek\u017f.amazonaws.com", false},
	} {
		if got := sameServer(tt.server, endpoint); got != tt.want {
			t.Errorf("sameServer(%q) = %v, want %v", tt.server, got, tt.want)
		}
	}
}

// endpointRegion reads the region of an EKS endpoint's name, and nothing
// else's.
func TestEndpointRegion(t *testing.T) {
	for server, want := range map[string]string{
		"https://0123ABCD.gr7.eu-west-1.eks.amazonaws.com":      "eu-west-1",
		"https://0123abcd.yl4.us-east-1.eks.amazonaws.com:443":  "us-east-1",
		"https://0123abcd.gr7.cn-north-1.eks.amazonaws.com.cn":  "cn-north-1",
		"https://0123abcd.gr7.eu-west-1.eks.amazonaws.com.evil": "",
		"https://x.eu-west-1.eks.amazonaws.com":                 "",
		"https://a.b.c.eu-west-1.eks.amazonaws.com":             "",
		"https://0123abcd.gr7.eu_west-1.eks.amazonaws.com":      "",
		"https://prod.example":                                  "",
		"://nonsense":                                           "",
	} {
		if got := endpointRegion(server); got != want {
			t.Errorf("endpointRegion(%q) = %q, want %q", server, got, want)
		}
	}
}
