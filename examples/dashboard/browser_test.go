package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/authvault/authvault/testkit/browser"
	"github.com/authvault/authvault/testkit/testwait"
)

// prefix is where the stand-in below serves the dashboard, as the API
// server's aggregation layer serves an APIService.
const prefix = "/apis/dashboard.example.com/v1"

// frontOf stands in for what runs in front of the dashboard (kubectl proxy,
// the API server, addon-proxy --apiservice): it serves upstream under
// prefix, as user in groups, and puts a redirect under prefix again.
func frontOf(t *testing.T, upstream, user string, groups ...string) *httptest.Server {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, prefix)
			r.Out.URL.RawPath = ""
			r.Out.Header.Set(headerUser, user)
			for _, g := range groups {
				r.Out.Header.Add(headerGroups, g)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, "/") {
				resp.Header.Set("Location", prefix+loc)
			}
			return nil
		},
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", proxy)
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	return front
}

// In a browser, under the aggregation layer's prefix: the page names the
// person, its form posts a note to the prefix's notes, and the 303 brings
// the browser back to the page under the prefix, which lists the note with
// its author.
func TestInABrowserUnderAPrefix(t *testing.T) {
	upstream := httptest.NewServer(testDashboard())
	defer upstream.Close()
	front := frontOf(t, upstream.URL, "alice@example.com", "system:authenticated", "devs")
	ctx, cancel := browser.New(t)
	defer cancel()
	run, runCancel := context.WithTimeout(ctx, testwait.Hang)
	defer runCancel()

	page := front.URL + prefix + "/notes"
	resp, err := chromedp.Run(run, chromedp.NavigateResponse(page))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: %d", page, resp.Status)
	}
	for id, want := range map[string]string{"user": "alice@example.com", "groups": "system:authenticated, devs"} {
		got, err := chromedp.Run(run, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}

	if err := chromedp.Do(run, chromedp.SendKeys(chromedp.ID("text"), "<b>typed</b> in a browser")); err != nil {
		t.Fatal(err)
	}
	resp, err = chromedp.RunResponse(run, chromedp.Submit(chromedp.ID("add")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || resp.URL != front.URL+prefix+"/notes" {
		t.Errorf("the submit loaded %s with status %d, want %s/notes with 200 (the 303 under the prefix)", resp.URL, resp.Status, front.URL+prefix)
	}
	notes, err := chromedp.Run(run, chromedp.Text(chromedp.CSSAll("#notes li")))
	if err != nil {
		t.Fatal(err)
	}
	if want := "alice@example.com: <b>typed</b> in a browser"; notes != want {
		t.Errorf("#notes lists %q, want %q", notes, want)
	}
}
