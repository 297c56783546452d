package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hook installs a git hook in the fixture's repository.
func (f *fixture) hook(name, script string) {
	f.t.Helper()
	path := filepath.Join(f.dir, ".git", "hooks", name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

// A maintainer's git may refuse a step half-way (a hook, a signing key that
// is not there): the release is refused and nothing it made stays.
func TestReleaseRefusedByGitHalfWayChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fixture)
		want  string
	}{
		{"a pre-commit hook fails", func(f *fixture) {
			f.hook("pre-commit", "echo 'no commits today' >&2; exit 1\n")
		}, "no commits today"},
		{"the commit cannot be signed", func(f *fixture) {
			f.git("config", "commit.gpgSign", "true")
			f.git("config", "gpg.program", filepath.Join(f.dir, "no-gpg"))
		}, "git commit"},
		{"the second tag is refused", func(f *fixture) {
			// reference-transaction runs for every ref update; "prepared"
			// may abort it. The root's tag is made first.
			f.hook("reference-transaction", "[ \"$1\" = prepared ] || exit 0\ngrep -q ' refs/tags/cloud/' && { echo 'no cloud tags' >&2; exit 1; }\nexit 0\n")
		}, "no cloud tags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.setup(f)
			before := f.state()
			out, err := f.release("v0.1.0")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("release = %v (printed %q), want an error with %q", err, out, tc.want)
			}
			if after := f.state(); after != before {
				t.Errorf("a refused release changed the repository:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// An interrupt (Ctrl-C cancels the release's context) while a tag is being
// made: the release commit and every tag are undone, the tag that git had
// written when it was stopped included.
func TestReleaseInterruptedChangesNothing(t *testing.T) {
	f := newFixture(t)
	started, resume := filepath.Join(f.dir, ".git", "started"), filepath.Join(f.dir, ".git", "resume")
	// Once the root's tag is written, the hook holds git until the test
	// has canceled the release.
	f.hook("reference-transaction", `[ "$1" = committed ] || exit 0
grep -q ' refs/tags/v0.1.0$' || exit 0
exec >/dev/null 2>&1
touch '`+started+`'
while [ ! -e '`+resume+`' ]; do sleep 0.05; done
`)
	before := f.state()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var out strings.Builder
		done <- release(ctx, f.dir, "v0.1.0", &out)
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the release ended before its tag was made: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the release made no tag within a minute")
		}
	}
	cancel()
	if err := os.WriteFile(resume, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the interrupted release did not end within a minute")
	}
	if err == nil {
		t.Fatal("an interrupted release reported success")
	}
	if after := f.state(); after != before {
		t.Errorf("an interrupted release changed the repository (%v):\nbefore %q\nafter  %q", err, before, after)
	}
}
