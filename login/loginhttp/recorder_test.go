package loginhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRecorder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, `{"access_token":"x"}`)
		case "/oauth":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"invalid_grant","error_description":"you sent %s","error_codes":[70002]}`, r.PostForm.Encode())
		case "/long":
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"not a word: %s"}`, r.PostForm.Encode())
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path, want, body string
		failed           bool
	}{
		{"/ok", "POST " + srv.URL + "/ok: HTTP 200", `{"access_token":"x"}`, false},
		{"/oauth", "POST " + srv.URL + "/oauth: HTTP 400 invalid_grant (AADSTS70002)", "you sent secret=s3cret", true},
		{"/long", "POST " + srv.URL + "/long: HTTP 401", "not a word: secret=s3cret", true},
	} {
		r := &Recorder{}
		u := strings.Replace(srv.URL, "http://", "http://user:pw@", 1) + tc.path + "?q=hidden"
		resp, err := (&http.Client{Transport: r}).PostForm(u, map[string][]string{"secret": {"s3cret"}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ex, sent := r.Last()
		if !sent || ex.String() != tc.want || ex.Failed() != tc.failed {
			t.Errorf("%s: got %q (failed %v), want %q (failed %v)", tc.path, ex, ex.Failed(), tc.want, tc.failed)
		}
		if !strings.Contains(string(body), tc.body) {
			t.Errorf("%s: the SDK gets %q, want the body back with %q", tc.path, body, tc.body)
		}
	}
}

func TestRecorderCancels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := &Recorder{Ctx: ctx}
	_, err := (&http.Client{Transport: r}).Get(srv.URL) // a request with no context of its own
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	text, cause, permanent := Failure(ctx, r, err)
	if text != "context canceled" || !errors.Is(cause, context.Canceled) || permanent {
		t.Errorf("Failure: got %q, %v, %v", text, cause, permanent)
	}
}

func TestFailureOfALocalError(t *testing.T) {
	err := errors.New("open https://user:pw@example.com/key.json: no such file\nsecond line")
	text, cause, permanent := Failure(context.Background(), &Recorder{}, err)
	if strings.Contains(text, "pw") || strings.Contains(text, "second") || cause != nil || !permanent {
		t.Errorf("got %q, %v, %v", text, cause, permanent)
	}
}
