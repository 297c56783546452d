// Package browser starts a headless Chromium for a test and drives it with
// chromedp, as a person's browser would meet a page: the dashboard behind
// addon-proxy and kubectl proxy, a form posted, a redirect followed.
//
//	ctx, cancel := browser.New(t)
//	defer cancel()
//	err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.Submit(chromedp.ID("add")))
//
// The browser is Debian's chromium-headless-shell, which hack/chromium.sh
// finds or installs and make test passes on as AUTHVAULT_CHROMIUM. A test
// that needs it fails without it, rather than skip: a skipped test proves
// nothing.
//
// # Lifetime
//
// Each New starts a browser of its own, with an empty profile in the test's
// temporary directory. Its cancel, which the test's cleanup calls too,
// closes it and waits for its processes to end and for chromedp's
// goroutines to return, so a package that checks for leaked goroutines
// (goleak) sees none.
package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/authvault/authvault/testkit/testwait"
)

// TB is what the package needs of a test: a *testing.T, or Ginkgo's
// GinkgoT().
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Cleanup(func())
	Failed() bool
}

// Env names the headless Chromium the tests use: make test sets it to what
// hack/chromium.sh prints. Without it, [Binary] runs hack/chromium.sh itself.
const Env = "AUTHVAULT_CHROMIUM"

// Binary returns the path of the headless Chromium: $AUTHVAULT_CHROMIUM when
// it is set, or else what hack/chromium.sh prints, which installs Debian's
// chromium-headless-shell when none is found (once per test binary). It
// fails the test (tb.Fatal) when there is no browser, saying how to get one.
func Binary(tb TB) string {
	tb.Helper()
	if path := os.Getenv(Env); path != "" {
		if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			tb.Fatalf("browser: %s=%s is not an executable file (%v): unset it, or set it to what bash hack/chromium.sh prints", Env, path, err)
		}
		return path
	}
	path, err := script()
	if err != nil {
		tb.Fatalf("browser: no headless Chromium: %v", err)
	}
	return path
}

// script runs hack/chromium.sh once per process and keeps what it printed,
// or why it failed: a second test does not run apt-get again.
var script = sync.OnceValues(func() (string, error) {
	sh, err := findScript()
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", sh)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("bash %s: %w\n%s", sh, err, strings.TrimSpace(stderr.String()))
	}
	path := strings.TrimSpace(stdout.String())
	if path == "" {
		return "", fmt.Errorf("bash %s printed no path\n%s", sh, strings.TrimSpace(stderr.String()))
	}
	return path, nil
})

// findScript returns the path of hack/chromium.sh: beside this file's
// source when its path is absolute, or else in the first directory at or
// above the working directory that holds it (a build with -trimpath, as
// make test's, records no directory; a test runs in its package's).
func findScript() (string, error) {
	const rel = "hack/chromium.sh"
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		sh := filepath.Join(filepath.Dir(file), "..", "..", rel)
		if _, err := os.Stat(sh); err == nil {
			return sh, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		sh := filepath.Join(dir, rel)
		if _, err := os.Stat(sh); err == nil {
			return sh, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("found no %s at or above the working directory, outside the authvault repository: set %s to a headless Chromium's path", rel, Env)
		}
		dir = up
	}
}

// New starts a headless Chromium (see [Binary]) for the test and returns a
// chromedp context on its first tab, the browser already running, and the
// func that closes it. The allocator's options are chromedp's defaults,
// then the package's (headless, no sandbox, no GPU, no QUIC, no first
// run, no background networking, component updates or sync, a new empty
// --user-data-dir in the test's temporary directory), then opts.
//
// cancel closes the browser and returns when its processes and chromedp's
// goroutines have ended; the test's cleanup calls it too, and a second
// call does nothing. Bound each action with a context derived from ctx
// (context.WithTimeout): a deadline on ctx itself would end the browser.
func New(tb TB, opts ...chromedp.ExecAllocatorOption) (ctx context.Context, cancel context.CancelFunc) {
	tb.Helper()
	path := Binary(tb)
	out := &syncBuffer{}
	all := slices.Concat(chromedp.DefaultExecAllocatorOptions[:], []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.CombinedOutput(out),
	}, opts)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), all...)
	ctx, ctxCancel := chromedp.NewContext(allocCtx)
	var once sync.Once
	cancel = func() {
		once.Do(func() {
			// Browser.close first: the browser ends its child processes
			// and writes no more to the profile. Then the contexts end,
			// which kills a browser that did not close, and wait for the
			// process and for chromedp's goroutines.
			closeCtx, closeCancel := context.WithTimeout(ctx, testwait.Hang)
			err := chromedp.Cancel(closeCtx)
			closeCancel()
			ctxCancel()
			allocCancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				tb.Logf("browser: %s did not close gracefully (killed): %v", path, err)
			}
		})
	}
	tb.Cleanup(func() {
		cancel()
		if tb.Failed() && out.Len() > 0 {
			tb.Logf("browser: %s printed:\n%s", path, out.String())
		}
	})
	// The first action starts the browser. It runs on ctx itself, not on a
	// context with a deadline, which would end the browser with it; the
	// wait is bounded here instead (the cleanup's cancel ends the action).
	start := make(chan error, 1)
	go func() { start <- chromedp.Do(ctx) }()
	select {
	case err := <-start:
		if err != nil {
			tb.Fatalf("browser: starting %s: %v\n%s", path, err, out.String())
		}
	case <-time.After(testwait.Hang):
		tb.Fatalf("browser: %s did not start within %v\n%s", path, testwait.Hang, out.String())
	}
	return ctx, cancel
}

// syncBuffer is a bytes.Buffer that the browser's output writer and the
// test's goroutine share.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
