package redact_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"

	"github.com/authvault/authvault/redact"
)

// proxyURL is a proxy URL as a kubeconfig may hold it: a space in its
// password makes it invalid.
var proxyURL = "http://admin:pa ss@proxy.example:3128"

// A login's errors and log lines quote what it was given: a URL with user
// info, a token the server echoes back.
func Example() {
	_, err := url.Parse(proxyURL) // url.Error quotes the URL
	fmt.Println(redact.Error(err))

	fmt.Println(redact.URL("dial http://admin:s3cret@proxy.example:3128: connection refused"))

	refused := errors.New(`token endpoint: 400 {"error":"invalid_client","secret":"c1ient-s3cret"}`)
	fmt.Println(redact.Secrets(refused, "c1ient-s3cret"))
	// Output:
	// parse "http://[redacted]@proxy.example:3128": net/url: invalid userinfo
	// dial http://[redacted]@proxy.example:3128: connection refused
	// token endpoint: 400 {"error":"invalid_client","secret":"[redacted]"}
}

// Every fmt verb prints the redacted message, and errors.Is still finds
// the cause.
func ExampleError() {
	err := redact.Error(fmt.Errorf("reading https://user:s3cret@vault.example/token: %w", fs.ErrNotExist))
	fmt.Printf("%v\n%+v\n%q\n", err, err, err)
	fmt.Println(errors.Is(err, fs.ErrNotExist))
	// Output:
	// reading https://[redacted]@vault.example/token: file does not exist
	// reading https://[redacted]@vault.example/token: file does not exist
	// "reading https://[redacted]@vault.example/token: file does not exist"
	// true
}

// Value takes the whole string as one URL: a field that holds a URL, whatever
// its user info holds.
func ExampleValue() {
	fmt.Println(redact.Value(`https://user:p"a ss@api.example:6443`))
	// Output: https://[redacted]@api.example:6443
}

// A type that holds a secret prints the same redacted text for every verb.
func ExamplePrint() {
	fmt.Printf("%v %q %#v\n", proxy{"http://u:s3cret@proxy.example"}, proxy{"http://u:s3cret@proxy.example"}, proxy{"http://u:s3cret@proxy.example"})
	// Output: http://[redacted]@proxy.example "http://[redacted]@proxy.example" http://[redacted]@proxy.example
}

// proxy is a user's type that holds a URL with user info.
type proxy struct{ url string }

func (p proxy) Format(f fmt.State, verb rune) { redact.Print(f, verb, redact.Value(p.url)) }
