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
// release with previous: before v1, a change to the exported API (either
// way) needs a new minor version, and a patch release may only fix.
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
		least := suggested.FindStringSubmatch(report)
		switch {
		case least == nil && err != nil:
			return fmt.Errorf("release: gorelease could not check %s against %s: %w\n%s", m.path, base, err, report)
		case least != nil && semver.Compare(version, least[1]) < 0:
			return fmt.Errorf("release: %s: what changed since %s calls for %s at least, not %s; gorelease says:\n%s", m.path, previous, least[1], version, report)
		}
		fmt.Fprintf(out, "%s: compatible with %s as %s\n", m.path, base, version)
	}
	return nil
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
