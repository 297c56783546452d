package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// gorelease is the API compatibility checker the release runs: it compares
// a module's exported API and requirements with an earlier version's and
// suggests the least version that says what changed.
const gorelease = "golang.org/x/exp/cmd/gorelease@v0.0.0-20261113113407-e3970619a1a4"

// suggested is how gorelease's report names the least acceptable version.
var suggested = regexp.MustCompile(`(?m)^Suggested version: (v\S+)`)

// checkCompatibility refuses version when, for any published module, it is
// less than what gorelease suggests after comparing the module's tagged
// release with previous, the last release that is not a pre-release, or
// when gorelease finds the module unfit to release: before v1, a change to
// the exported API (either way) needs a new minor version, and a patch
// release may only fix.
// The tags of version and previous must exist; nothing is fetched from a
// public proxy but the dependencies.
func checkCompatibility(ctx context.Context, repo string, mods []published, previous, version string, out io.Writer) error {
	if previous == "" {
		fmt.Fprintf(out, "%s is the first release: there is no earlier API to compare\n", version)
		return nil
	}
	tmp, err := os.MkdirTemp("", "authvault-release-")
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer os.RemoveAll(tmp)
	// gorelease refuses a version its proxy already lists, and a nested
	// module at version requires the root at version: the root is checked
	// against a proxy of earlier releases alone, the others against one
	// that also holds the root's new release.
	earlier, withRoot := filepath.Join(tmp, "earlier"), filepath.Join(tmp, "with-root")
	tagList, err := git(ctx, repo, "tag", "--list")
	if err != nil {
		return err
	}
	tags := strings.Fields(tagList)
	for _, m := range mods {
		for _, p := range []string{earlier, withRoot} {
			if slices.Contains(tags, m.tag(previous)) {
				if err := publish(ctx, p, repo, m, previous); err != nil {
					return err
				}
			}
		}
	}
	if err := publish(ctx, withRoot, repo, mods[0], version); err != nil {
		return err
	}
	bin := filepath.Join(tmp, "bin")
	if out, err := goOutput(ctx, "", append(os.Environ(), "GOBIN="+bin), "install", gorelease); err != nil {
		return fmt.Errorf("release: installing gorelease: %w\n%s", err, out)
	}
	for i, m := range mods {
		proxy := withRoot
		if i == 0 {
			proxy = earlier
		}
		base := previous
		if !slices.Contains(tags, m.tag(previous)) {
			base = "none"
		}
		env, err := goEnv(ctx, proxy, filepath.Join(tmp, "modcache"))
		if err != nil {
			return err
		}
		report, err := run(ctx, filepath.Join(repo, m.dir), env, filepath.Join(bin, "gorelease"), "-base="+base)
		if err := verdict(m.path, i > 0, previous, base, version, report, err); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: compatible with %s as %s\n", m.path, base, version)
	}
	return nil
}

// verdict is the release's answer to gorelease's report on module path
// compared with base (previous, or "none" for a module that previous did
// not have), and to its exit (err). It fails closed: version must be at
// least the version gorelease suggests, and gorelease must have found
// nothing else wrong: its diagnostics (a requirement the code needs and
// go.mod lacks, a retracted requirement…) make it exit non-zero. One is
// expected of a nested module and passes: its go.sum lacks the root's
// sums, for in the repository the root is the working tree, and the
// root's release is not made yet when go.sum is written. A pre-release is
// a candidate for its version without the pre-release: v0.2.0-rc.1 may
// carry what calls for v0.2.0.
func verdict(path string, nested bool, previous, base, version, report string, err error) error {
	least := suggested.FindStringSubmatch(report)
	switch {
	case least == nil:
		cause := "no error"
		if err != nil {
			cause = err.Error()
		}
		return fmt.Errorf("release: gorelease named no version for %s against %s (%s): refused, as the API was not checked; gorelease says:\n%s", path, base, cause, report)
	case semver.Compare(strings.TrimSuffix(version, semver.Prerelease(version)), least[1]) < 0:
		return fmt.Errorf("release: %s: what changed since %s calls for %s at least, not %s; gorelease says:\n%s", path, previous, least[1], version, report)
	case err == nil:
		return nil
	}
	found := diagnostics(report)
	expected := nested && len(found) > 0
	for _, d := range found {
		expected = expected && d == missingRootSums
	}
	if !expected {
		return fmt.Errorf("release: gorelease found %s unfit to release (%w); gorelease says:\n%s", path, err, report)
	}
	return nil
}

// missingRootSums is gorelease's diagnostic for a go.sum that lacks sums.
const missingRootSums = "go.sum: one or more sums are missing. Run 'go mod tidy' to add missing sums."

// diagnostics are the entries of the "# diagnostics" section of a gorelease
// report, an entry's indented lines joined to it; none when there is no
// such section.
func diagnostics(report string) []string {
	_, section, found := strings.Cut(report, "# diagnostics\n")
	if !found {
		return nil
	}
	section, _, _ = strings.Cut(section, "\n\n")
	var out []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "\t") && len(out) > 0 {
			out[len(out)-1] += "\n" + line
			continue
		}
		out = append(out, line)
	}
	return out
}

// goOutput runs the go command in dir with env (nil: this process's) and
// returns what it printed, stdout and stderr together.
func goOutput(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	return run(ctx, dir, env, "go", args...)
}

// run runs name in dir with env (nil: this process's) and returns what it
// printed, stdout and stderr together.
func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	err := cmd.Run()
	out := strings.TrimSpace(buf.String())
	if err != nil {
		return out, fmt.Errorf("%s %s: %w", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out, nil
}
