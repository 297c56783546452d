package loginhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/login/loginhttp"
)

// echoingEndpoint is a token endpoint that refuses the client and quotes
// its request back, as a faulty server or a misconfigured proxy may.
type echoingEndpoint struct{}

func (echoingEndpoint) RoundTrip(req *http.Request) (*http.Response, error) {
	form, _ := io.ReadAll(req.Body)
	body := fmt.Sprintf(`{"error":"invalid_client","error_description":"bad client in %s"}`, form)
	return &http.Response{StatusCode: http.StatusUnauthorized, Request: req, Body: io.NopCloser(strings.NewReader(body))}, nil
}

// fetchToken stands for an SDK's token request: its error quotes the
// endpoint's answer.
func fetchToken(client *http.Client) (string, error) {
	resp, err := client.PostForm("https://user:pw@login.example/oauth2/token?tenant=t", url.Values{"client_secret": {"s3cret"}})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("cannot fetch token: %d: %s", resp.StatusCode, body)
	}
	return string(body), nil
}

// A login whose token request fails says what failed, and the SDK's text
// (here quoting the client secret) stays out of its error.
func Example() {
	ctx := context.Background()
	myLogin := func(ctx context.Context) (*login.ConnectionInfo, error) {
		rec := &loginhttp.Recorder{Ctx: ctx, Base: echoingEndpoint{}}
		tok, err := fetchToken(&http.Client{Transport: rec})
		if err != nil {
			text, cause, permanent := loginhttp.Failure(ctx, rec, err)
			if cause != nil {
				return nil, fmt.Errorf("mylogin: no token: %w", cause) // the login's context ended
			}
			failed := errors.New("mylogin: no token: " + text)
			if permanent {
				return nil, login.Permanent(failed)
			}
			return nil, failed
		}
		return &login.ConnectionInfo{Server: "https://api.example", Token: tok}, nil
	}

	_, err := myLogin(ctx)
	var permanent *login.PermanentError
	fmt.Println(err)
	fmt.Println("permanent:", errors.As(err, &permanent))
	// Output:
	// mylogin: no token: POST https://login.example/oauth2/token: HTTP 401 invalid_client
	// permanent: true
}

// An SDK that hands over the failed response (azidentity's
// AuthenticationFailedError.RawResponse) is read with Response.
func ExampleResponse() {
	req, _ := http.NewRequest(http.MethodPost, "https://login.example/tenant/oauth2/v2.0/token", nil)
	resp := &http.Response{
		StatusCode: http.StatusBadRequest,
		Request:    req,
		Body:       io.NopCloser(strings.NewReader(`{"error":"invalid_grant","error_description":"assertion eyJ... expired","error_codes":[700024]}`)),
	}
	ex := loginhttp.Response(resp)
	fmt.Println(ex)
	fmt.Println("permanent:", loginhttp.PermanentStatus(ex.Status))
	// Output:
	// POST https://login.example/tenant/oauth2/v2.0/token: HTTP 400 invalid_grant (AADSTS700024)
	// permanent: true
}
