package browser

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/authvault/authvault/testkit/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// form is a page with a text and a form that posts to a relative URL, and
// the server behind it: a submit answers 303 to the page, which then shows
// the posted text.
type form struct {
	mu    sync.Mutex // guards posts
	posts []string
}

func (f *form) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/":
		f.mu.Lock()
		last := ""
		if len(f.posts) > 0 {
			last = f.posts[len(f.posts)-1]
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>form</title>
<p id="greeting">hello from the server</p>
<p id="last">%s</p>
<form id="add" method="post" action="post"><input id="text" name="text"><button>add</button></form>`, html.EscapeString(last))
	case r.Method == http.MethodPost && r.URL.Path == "/post":
		f.mu.Lock()
		f.posts = append(f.posts, r.PostFormValue("text"))
		f.mu.Unlock()
		http.Redirect(w, r, "/", http.StatusSeeOther)
	default:
		http.NotFound(w, r)
	}
}

func (f *form) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.posts...)
}

// The browser shows the server's page, and a form it submits reaches the
// server, whose redirect it follows.
func TestPageAndFormSubmit(t *testing.T) {
	f := &form{}
	srv := httptest.NewServer(f) // on 127.0.0.1
	defer srv.Close()
	ctx, cancel := New(t)
	defer cancel()

	run, runCancel := context.WithTimeout(ctx, testwait.Hang)
	defer runCancel()
	if err := chromedp.Do(run, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	greeting, err := chromedp.Run(run, chromedp.Text(chromedp.ID("greeting")))
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello from the server"; greeting != want {
		t.Errorf("#greeting = %q, want %q", greeting, want)
	}

	if err := chromedp.Do(run, chromedp.SendKeys(chromedp.ID("text"), "typed in a browser")); err != nil {
		t.Fatal(err)
	}
	// RunResponse waits for the page the submit loads: the 303's target.
	resp, err := chromedp.RunResponse(run, chromedp.Submit(chromedp.ID("add")))
	if err != nil {
		t.Fatalf("submitting the form: %v (the server got %q)", err, f.got())
	}
	if resp.Status != http.StatusOK || resp.URL != srv.URL+"/" {
		t.Errorf("the submit loaded %s with status %d, want %s/ with 200 (the 303's Location)", resp.URL, resp.Status, srv.URL)
	}
	last, err := chromedp.Run(run, chromedp.Text(chromedp.ID("last")))
	if err != nil {
		t.Fatal(err)
	}
	if want := "typed in a browser"; last != want {
		t.Errorf("after the submit #last = %q, want %q", last, want)
	}
	if got, want := f.got(), []string{"typed in a browser"}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("the server got posts %q, want %q", got, want)
	}
}

// cancel ends every process of the browser: none is left with its
// profile directory on its command line. (goleak, in TestMain, checks
// chromedp's goroutines.)
func TestCancelEndsTheBrowser(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Log("the processes are looked for in /proc, which only Linux has; the goroutines are still checked")
	}
	dir := t.TempDir()
	ctx, cancel := New(t, chromedp.UserDataDir(dir))
	if runtime.GOOS == "linux" && len(using(t, dir)) == 0 {
		t.Fatalf("found no process with --user-data-dir=%s while the browser runs: the check looks in the wrong place", dir)
	}
	cancel()
	if err := ctx.Err(); err == nil {
		t.Error("the context is not done after cancel")
	}
	if runtime.GOOS == "linux" {
		if pids := using(t, dir); len(pids) > 0 {
			t.Errorf("processes %v still run with --user-data-dir=%s after cancel", pids, dir)
		}
	}
	cancel() // a second call does nothing
}

// using returns the processes whose command line holds
// --user-data-dir=dir.
func using(t *testing.T, dir string) []string {
	t.Helper()
	want := []byte("--user-data-dir=" + dir + "\x00")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, want) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// fatalTB records a Fatalf and ends its goroutine, as testing's does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// A wrong AUTHVAULT_CHROMIUM fails the test and says so; it is never
// passed over for another browser.
func TestBinaryFailsOnAWrongEnv(t *testing.T) {
	for _, path := range []string{filepath.Join(t.TempDir(), "absent"), t.TempDir()} {
		t.Setenv(Env, path)
		f := &fatalTB{TB: t}
		done := make(chan string, 1)
		go func() {
			defer close(done)
			done <- Binary(f)
		}()
		if got, ok := <-done; ok {
			t.Errorf("Binary with %s=%s returned %q, want a failure", Env, path, got)
		}
		for _, want := range []string{Env + "=" + path, "not an executable file", "hack/chromium.sh"} {
			if !strings.Contains(f.msg, want) {
				t.Errorf("Binary with %s=%s failed with %q, want it to say %q", Env, path, f.msg, want)
			}
		}
	}
}

// Without AUTHVAULT_CHROMIUM, Binary finds hack/chromium.sh from the
// package's directory and runs it.
func TestBinaryRunsTheScript(t *testing.T) {
	t.Setenv(Env, "")
	path := Binary(t)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("Binary = %q, not an executable (%v)", path, err)
	}
	if !strings.Contains(filepath.Base(path), "chrom") {
		t.Errorf("Binary = %q, want a Chromium", path)
	}
}
