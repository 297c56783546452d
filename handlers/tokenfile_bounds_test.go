//go:build unix

package handlers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

// tokenFileSecret marks the content of the token files below: no error may
// quote it.
const tokenFileSecret = "TOKENFILE-SECRET"

// readTokenFile runs TokenFile on path, and fails the test should it not
// return within a hang's bound (a FIFO must not hang a login).
func readTokenFile(t *testing.T, path string) (*login.ConnectionInfo, error) {
	t.Helper()
	type result struct {
		info *login.ConnectionInfo
		err  error
	}
	done := make(chan result, 1)
	go func() {
		info, err := TokenFile(path, login.ConnectionInfo{Server: "https://a"})(context.Background())
		done <- result{info, err}
	}()
	select {
	case r := <-done:
		return r.info, r.err
	case <-time.After(testwait.Hang):
		// Let the blocked open return, so the goroutine ends.
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatalf("TokenFile(%s) did not return within %v", path, testwait.Hang)
		return nil, nil
	}
}

// Every file that does not hold one token gives an error that names the
// file, says what is wrong, and never quotes the content.
func TestTokenFileRejectsWhatIsNotAToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		writeToken(t, path, content)
		return path
	}
	big := strings.Repeat("A", maxTokenFile) + tokenFileSecret
	sparse := filepath.Join(dir, "sparse")
	if f, err := os.Create(sparse); err != nil {
		t.Fatal(err)
	} else {
		_, _ = f.WriteString(tokenFileSecret)
		_ = f.Truncate(64 << 20)
		f.Close()
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	subdir := filepath.Join(dir, "a-directory")
	_ = os.Mkdir(subdir, 0o700)

	tests := []struct {
		name, path, want string
		permanent        bool
	}{
		{"missing", filepath.Join(dir, "missing"), "no such file", false},
		{"empty", file("empty", ""), "is empty", false},
		{"whitespace only", file("blank", " \t\r\n \n"), "is empty", false},
		{"CR inside", file("cr", "abc"+tokenFileSecret+"\rdef\n"), "control character", false},
		{"LF inside", file("lf", tokenFileSecret+"-one\n"+tokenFileSecret+"-two\n"), "control character", false},
		{"CRLF inside", file("crlf", tokenFileSecret+"\r\nmore"), "control character", false},
		{"NUL inside", file("nul", tokenFileSecret+"\x00tail"), "control character", false},
		{"tab inside", file("tab", tokenFileSecret+"\ttail"), "control character", false},
		{"DEL inside", file("del", tokenFileSecret+"\x7ftail"), "control character", false},
		{"one byte too large", file("big", big), "larger than 1 MiB", false},
		{"64 MiB", sparse, "larger than 1 MiB", false},
		{"directory", subdir, "is a directory", true},
		{"FIFO", fifo, "not a regular file", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := readTokenFile(t, tt.path)
			if err == nil {
				t.Fatalf("TokenFile(%s) = %v, want an error", tt.path, info)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "handlers: token file") || !strings.Contains(msg, tt.path) || !strings.Contains(msg, tt.want) {
				t.Errorf("error = %q, want one that names %s and says %q", msg, tt.path, tt.want)
			}
			for form, s := range errorForms(err) {
				if strings.Contains(s, tokenFileSecret) || strings.Contains(s, "AAAA") {
					t.Errorf("error as %s quotes the file: %.200s", form, s)
				}
			}
			var pe *login.PermanentError
			if got := errors.As(err, &pe); got != tt.permanent {
				t.Errorf("permanent = %v, want %v", got, tt.permanent)
			}
		})
	}
}

// A token of up to 1 MiB, with surrounding whitespace of any kind, is read;
// so is a token behind a symbolic link, as projected volumes have them.
func TestTokenFileAccepts(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]struct{ content, want string }{
		"CRLF at the end":      {"tok-1\r\n", "tok-1"},
		"whitespace around":    {"\n\t tok-2 \t\r\n\n", "tok-2"},
		"1 MiB exactly":        {strings.Repeat("b", maxTokenFile), strings.Repeat("b", maxTokenFile)},
		"1 MiB with a newline": {strings.Repeat("c", maxTokenFile-1) + "\n", strings.Repeat("c", maxTokenFile-1)},
		"spaces around":        {"  eyJ.eyJ.sig  ", "eyJ.eyJ.sig"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "token")
			writeToken(t, path, tt.content)
			link := filepath.Join(dir, "link")
			_ = os.Remove(link)
			if err := os.Symlink(path, link); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, link} {
				info, err := readTokenFile(t, p)
				if err != nil {
					t.Fatalf("TokenFile(%s) error = %v", p, err)
				}
				if info.Token != tt.want {
					t.Errorf("token of %d bytes, want %d bytes", len(info.Token), len(tt.want))
				}
			}
		})
	}
}

// A large file is not read whole: a login allocates about the bound, not
// the file's size.
func TestTokenFileReadIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Truncate(64 << 20)
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = TokenFile(path, login.ConnectionInfo{})(context.Background())
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("TokenFile() of a 64 MiB file succeeded")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("reading a 64 MiB file allocated %d MiB, want a bounded read", alloc>>20)
	}
}
