package main

import (
	"strings"
	"testing"
)

// changelog gives the fixture's CHANGELOG.md a section for each version.
func (f *fixture) changelog(versions ...string) {
	f.t.Helper()
	var b strings.Builder
	b.WriteString("# Changelog\n\n## [Unreleased]\n\n")
	for _, v := range versions {
		b.WriteString("## [" + strings.TrimPrefix(v, "v") + "] - 2026-11-27\n\n- " + v + ".\n\n")
	}
	f.write("CHANGELOG.md", b.String())
}

// addAPI adds an exported function to the root module: a compatible API
// change, which calls for a new minor version.
func (f *fixture) addAPI(name string) {
	f.t.Helper()
	f.write(strings.ToLower(name)+".go", "package fix\n\n// "+name+" is new.\nfunc "+name+"() {}\n")
}

func (f *fixture) mustRelease(version string) string {
	f.t.Helper()
	out, err := f.release(version)
	if err != nil {
		f.t.Fatalf("release %s: %v", version, err)
	}
	return out
}

// A pre-release of the next minor may carry the API changes that minor
// calls for: v0.2.0-rc.1 after v0.1.0 is what v0.2.0 would be. Later
// candidates are compared with the last release, not with the candidate
// before: each stays a candidate for v0.2.0.
func TestReleasePreReleasesOfTheNextMinor(t *testing.T) {
	f := newFixture(t)
	f.changelog("v0.1.0", "v0.2.0-rc.1", "v0.2.0-rc.2", "v0.2.0")
	f.commit("changelog")
	f.mustRelease("v0.1.0")
	f.addAPI("Added")
	f.commit("an addition")
	f.mustRelease("v0.2.0-rc.1")
	f.addAPI("AddedLater")
	f.commit("another addition")
	out := f.mustRelease("v0.2.0-rc.2")
	if !strings.Contains(out, "example.com/fix: compatible with v0.1.0 as v0.2.0-rc.2") {
		t.Errorf("the second candidate printed %q, want it compared with v0.1.0", out)
	}
	f.mustRelease("v0.2.0")
}

// A patch release compares with the last release, not with a candidate of
// the patch: an API change made after v0.1.1-rc.1 does not slip into v0.1.1.
func TestReleaseRefusesAnAPIChangeInAPatchAfterItsCandidate(t *testing.T) {
	f := newFixture(t)
	f.changelog("v0.1.0", "v0.1.1-rc.1", "v0.1.1")
	f.commit("changelog")
	f.mustRelease("v0.1.0")
	f.mustRelease("v0.1.1-rc.1")
	f.addAPI("Added")
	f.commit("an addition")
	before := f.state()
	_, err := f.release("v0.1.1")
	if err == nil || !strings.Contains(err.Error(), "example.com/fix: what changed since v0.1.0 calls for v0.2.0 at least, not v0.1.1") {
		t.Fatalf("a patch with an API change after its candidate: %v", err)
	}
	if after := f.state(); after != before {
		t.Errorf("a refused release changed the repository:\nbefore %q\nafter  %q", before, after)
	}
}

// What gorelease finds wrong besides the version (here a nested module
// whose go.mod lacks a requirement its code needs, which users' builds
// would fail on) refuses the release, even when the version is high enough.
func TestReleaseRefusesWhatGoreleaseFindsWrong(t *testing.T) {
	f := newFixture(t)
	f.mustRelease("v0.1.0")
	f.write("cloud/x/x.go", "// Package x is a release test's nested module.\npackage x\n\nimport (\n\t\"example.com/fix\"\n\t\"golang.org/x/mod/semver\"\n)\n\n// Greeting is fix's.\nfunc Greeting() string { return semver.Canonical(fix.Hello()) }\n")
	f.commit("an import without its requirement")
	before := f.state()
	_, err := f.release("v0.2.0")
	if err == nil || !strings.Contains(err.Error(), "example.com/fix/cloud/x") || !strings.Contains(err.Error(), "requirements are needed") {
		t.Fatalf("a nested module that needs a requirement it lacks: %v", err)
	}
	if after := f.state(); after != before {
		t.Errorf("a refused release changed the repository:\nbefore %q\nafter  %q", before, after)
	}
}
