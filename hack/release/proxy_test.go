package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Versions and module paths with capital letters are escaped in a proxy's
// files, as the go command asks for them (v0.2.0-RC.1 is
// v0.2.0-!r!c.1.zip): published so, the go command finds them.
func TestPublishEscapesCapitals(t *testing.T) {
	f := newFixture(t)
	f.write("go.mod", "module example.com/Fix\n\ngo 1.26\n")
	f.commit("a path with a capital")
	const version = "v0.2.0-RC.1"
	f.git("tag", version)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proxy := filepath.Join(t.TempDir(), "proxy")
	if err := publish(ctx, proxy, f.dir, published{path: "example.com/Fix"}, version); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOPROXY=file://"+filepath.ToSlash(proxy), "GOMODCACHE="+filepath.Join(t.TempDir(), "modcache"),
		"GOFLAGS=-modcacherw", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := goOutput(ctx, t.TempDir(), env, "mod", "download", "-json", "example.com/Fix@"+version)
	if err != nil || !strings.Contains(out, `"Version": "`+version+`"`) {
		t.Fatalf("go mod download example.com/Fix@%s from the proxy: %v\n%s", version, err, out)
	}
}

// The verdict on gorelease's report fails closed: a report that names no
// version, whatever gorelease's exit, refuses the release.
func TestGoreleaseVerdict(t *testing.T) {
	exit1 := &exitError{}
	const sums = "# diagnostics\ngo.sum: one or more sums are missing. Run 'go mod tidy' to add missing sums.\n\n# summary\nSuggested version: v0.2.0\n"
	const needed = "# diagnostics\ngo.mod: the following requirements are needed\n\tgolang.org/x/mod@v0.30.0\nRun 'go mod tidy' to add missing requirements.\ngo.sum: one or more sums are missing. Run 'go mod tidy' to add missing sums.\n\n# summary\nSuggested version: v0.2.0\n"
	for _, tc := range []struct {
		name    string
		nested  bool
		version string
		report  string
		err     error
		want    string // "" accepts
	}{
		{"patch, no change", false, "v0.1.1", "# summary\nSuggested version: v0.1.1\n", nil, ""},
		{"minor over a patch", false, "v0.2.0", "# summary\nSuggested version: v0.1.1\n", nil, ""},
		{"patch, a change", false, "v0.1.1", "# summary\nSuggested version: v0.2.0\n", nil, "calls for v0.2.0 at least, not v0.1.1"},
		{"a candidate of the minor", false, "v0.2.0-rc.1", "Suggested version: v0.2.0\n", nil, ""},
		{"a candidate of a patch", false, "v0.1.1-rc.1", "Suggested version: v0.2.0\n", nil, "calls for v0.2.0 at least, not v0.1.1-rc.1"},
		{"no suggestion, exit 0", false, "v0.2.0", "# example.com/fix\n## compatible changes\nX: added\n", nil, "gorelease named no version"},
		{"no suggestion, exit 1", false, "v0.2.0", "Cannot suggest a release version.\nErrors were found.\n", exit1, "gorelease named no version"},
		{"missing sums of the root", false, "v0.2.0", sums, exit1, "unfit to release"},
		{"missing sums of a nested module", true, "v0.2.0", sums, exit1, ""},
		{"a needed requirement", true, "v0.2.0", needed, exit1, "golang.org/x/mod@v0.30.0"},
		{"exit 1 and no diagnostics", true, "v0.2.0", "Suggested version: v0.2.0\n", exit1, "unfit to release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verdict("example.com/fix", tc.nested, "v0.1.0", "v0.1.0", tc.version, tc.report, tc.err)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("verdict = %v, want it accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("verdict = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// exitError stands for gorelease's exit status 1.
type exitError struct{}

func (*exitError) Error() string { return "gorelease -base=v0.1.0: exit status 1" }

// The go commands against the file proxy keep the caller's GOFLAGS (make
// test's -trimpath, or one go env -w gave), so that what they compile is
// that build, from the cache, and not the whole of it again.
func TestGoEnvKeepsTheCallersGOFLAGS(t *testing.T) {
	for _, from := range []string{"the environment", "go env -w"} {
		t.Run(from, func(t *testing.T) {
			goenv := filepath.Join(t.TempDir(), "env")
			if err := os.WriteFile(goenv, []byte("GOFLAGS=-buildvcs=false\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if from == "go env -w" {
				if err := os.WriteFile(goenv, []byte("GOFLAGS=-trimpath\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				t.Setenv("GOFLAGS", "")
			} else {
				t.Setenv("GOFLAGS", "-trimpath")
			}
			t.Setenv("GOENV", goenv)
			env, err := goEnv(context.Background(), t.TempDir(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var flags string
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
					flags = v // the last one is the one exec.Cmd passes on
				}
			}
			for _, want := range []string{"-trimpath", "-modcacherw"} {
				if !slices.Contains(strings.Fields(flags), want) {
					t.Errorf("GOFLAGS=%q, want it to hold %s", flags, want)
				}
			}
		})
	}
}
