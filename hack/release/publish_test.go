package main

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// publishTimeout bounds a hang of the whole publication: a release, four
// zips and four consumers fetched and built. With a warm build cache it
// takes a minute or two; the first run on a machine compiles every
// dependency once more, with -trimpath (so that later runs hit the cache
// wherever the temporary module cache is), which on two busy cores took
// most of 25 minutes.
const publishTimeout = 25 * time.Minute

// The oldest Kubernetes libraries authvault supports: a consumer already on
// them keeps them when it adds authvault.
const (
	oldestControllerRuntime = "v0.23.0"
	oldestClientGo          = "v0.35.0"
)

// TestPublishedModulesBuildAlone releases this repository's HEAD in a clone,
// publishes every module to a file proxy as the module proxy would serve
// the tags, and then, for each module alone, does what a user does in a
// module of their own outside the repository: go get it at the release,
// go mod tidy, and build a program that imports it (for the root, the
// README's quickstart). Nothing of the repository is on the consumer's
// path but what the proxy serves, so a requirement of an unpublished
// version, a replace that only works in the repository or a file the zip
// leaves out fails here.
func TestPublishedModulesBuildAlone(t *testing.T) {
	gitEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	top, err := git(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "authvault")
	// The clone's main is the HEAD under test, whichever branch it is on.
	if _, err := git(ctx, ".", "clone", "--quiet", top, clone); err != nil {
		t.Fatal(err)
	}
	if _, err := git(ctx, clone, "checkout", "--quiet", "-B", "main"); err != nil {
		t.Fatal(err)
	}
	version := nextRelease(t, clone)
	var out strings.Builder
	if err := release(ctx, clone, version, &out); err != nil {
		t.Fatalf("make release VERSION=%s in a clone of main: %v", version, err)
	}
	t.Logf("release %s:\n%s", version, out.String())
	mods, err := publishedModules(clone)
	if err != nil {
		t.Fatal(err)
	}
	var nested []string
	for _, m := range mods[1:] {
		nested = append(nested, m.dir)
	}
	proxy := filepath.Join(t.TempDir(), "proxy")
	for _, m := range mods {
		if err := publish(ctx, proxy, clone, m, version); err != nil {
			t.Fatal(err)
		}
		checkZip(t, proxy, m, version, nested)
	}
	env, err := goEnv(ctx, proxy, filepath.Join(t.TempDir(), "modcache"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		t.Run(m.path, func(t *testing.T) {
			consumer := t.TempDir()
			goCmd := func(args ...string) string {
				t.Helper()
				out, err := goOutput(ctx, consumer, env, args...)
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				return out
			}
			write(t, filepath.Join(consumer, "go.mod"), "module example.com/consumer\n\ngo 1.26\n")
			if m.dir == "" {
				// An operator already on the oldest controller-runtime
				// authvault supports keeps it, and its client-go.
				goCmd("get", "sigs.k8s.io/controller-runtime@"+oldestControllerRuntime, "k8s.io/client-go@"+oldestClientGo)
				quickstart, err := git(ctx, clone, "show", version+":examples/quickstart/main.go")
				if err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(consumer, "main.go"), quickstart+"\n")
				elect, err := git(ctx, clone, "show", version+":examples/quickstart/elect.go")
				if err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(consumer, "elect.go"), elect+"\n")
			} else {
				write(t, filepath.Join(consumer, "main.go"), fmt.Sprintf("package main\n\nimport login %q\n\nfunc main() { _ = login.Login }\n", m.path))
			}
			goCmd("get", m.path+"@"+version)
			goCmd("mod", "tidy")
			goCmd("build", "-trimpath", "-o", os.DevNull, ".")
			got := goCmd("list", "-m", "-f", "{{.Path}} {{.Version}}", m.path, "k8s.io/client-go", "sigs.k8s.io/controller-runtime")
			for _, want := range []string{m.path + " " + version, "k8s.io/client-go " + oldestClientGo} {
				if !strings.Contains(got, want) {
					t.Errorf("the consumer's modules:\n%s\nwant %s", got, want)
				}
			}
			if m.dir == "" && !strings.Contains(got, "sigs.k8s.io/controller-runtime "+oldestControllerRuntime) {
				t.Errorf("adding authvault moved the consumer's controller-runtime:\n%s", got)
			}
		})
	}
}

// nextRelease is the version the test releases: the newest section of
// CHANGELOG.md when it is not tagged yet (the release main is ready for),
// or else the next minor after the newest tag, with a section the test adds.
func nextRelease(t *testing.T, repo string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	tags, err := git(context.Background(), repo, "tag", "--list")
	if err != nil {
		t.Fatal(err)
	}
	newest := newestRelease(strings.Fields(tags))
	if s := changelogSection.FindSubmatch(data); s != nil && semver.Compare("v"+string(s[1]), newest) > 0 {
		return "v" + string(s[1])
	}
	next := "v0.1.0"
	if newest != "" {
		next = semver.MajorMinor(newest) + ".0"
		var major, minor int
		if _, err := fmt.Sscanf(next, "v%d.%d.0", &major, &minor); err != nil {
			t.Fatal(err)
		}
		next = fmt.Sprintf("v%d.%d.0", major, minor+1)
	}
	section := fmt.Sprintf("## [%s] - 2026-11-27\n\n### Changed\n\n- What the test releases.\n\n", strings.TrimPrefix(next, "v"))
	updated := strings.Replace(string(data), "## [Unreleased]\n", "## [Unreleased]\n\n"+section, 1)
	write(t, filepath.Join(repo, "CHANGELOG.md"), updated)
	if _, err := git(context.Background(), repo, "commit", "--quiet", "--all", "--message", "the test's release"); err != nil {
		t.Fatal(err)
	}
	return next
}

// checkZip requires the module's zip to carry its license (a user, and the
// package index, read the license in the module zip, which holds only the
// module's own directory) and the root's to leave the nested modules out.
func checkZip(t *testing.T, proxy string, m published, version string, nestedDirs []string) {
	t.Helper()
	escaped, err := module.EscapePath(m.path)
	if err != nil {
		t.Fatal(err)
	}
	escapedVersion, err := module.EscapeVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	z, err := zip.OpenReader(filepath.Join(proxy, escaped, "@v", escapedVersion+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	prefix := m.path + "@" + version + "/"
	var license bool
	for _, f := range z.File {
		name := strings.TrimPrefix(f.Name, prefix)
		license = license || name == "LICENSE"
		for _, nested := range nestedDirs {
			if m.dir == "" && strings.HasPrefix(name, nested+"/") {
				t.Errorf("the root module's zip holds %s, which belongs to the module in %s", name, nested)
			}
		}
	}
	if !license {
		t.Errorf("%s@%s's zip has no LICENSE", m.path, version)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
