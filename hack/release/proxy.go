package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// publish writes what a module proxy serves for m at version, from the
// module's tag in repo, into the file proxy at proxyDir (the GOPROXY
// protocol's layout, as GOPROXY=file://proxyDir reads it): the zip as
// golang.org/x/mod/zip makes it from the tagged tree, go.mod, the .info
// and the version list.
func publish(ctx context.Context, proxyDir, repo string, m published, version string) error {
	escaped, err := module.EscapePath(m.path)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	// The go command asks for a capital letter of a path or a version as
	// "!" and the letter in lower case (v0.2.0-RC.1 as v0.2.0-!r!c.1).
	escapedVersion, err := module.EscapeVersion(version)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	dir := filepath.Join(proxyDir, escaped, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	tag := m.tag(version)
	gomod, err := git(ctx, repo, "show", tag+":"+filepath.ToSlash(filepath.Join(m.dir, "go.mod")))
	if err != nil {
		return err
	}
	when, err := git(ctx, repo, "log", "-1", "--format=%cI", tag)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return fmt.Errorf("release: the time of %s: %w", tag, err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t.UTC()})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, escapedVersion+".zip"))
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	err = zip.CreateFromVCS(f, module.Version{Path: m.path, Version: version}, repo, tag, m.dir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release: the zip of %s@%s: %w", m.path, version, err)
	}
	if err := os.WriteFile(filepath.Join(dir, escapedVersion+".mod"), []byte(gomod+"\n"), 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, escapedVersion+".info"), info, 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return addToList(filepath.Join(dir, "list"), version)
}

// addToList adds version to a proxy's version list, kept sorted.
func addToList(path, version string) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("release: %w", err)
	}
	versions := strings.Fields(string(data))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	if err := os.WriteFile(path, []byte(strings.Join(versions, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// goEnv is the environment for the go command against a file proxy at
// proxyDir: the proxy first, then this machine's module cache (itself a
// proxy's layout) and the GOPROXY in effect for what neither holds; a
// module cache of its own, so that what the proxy serves as a version is
// never mixed with an earlier run's, and checksums unchecked, for the
// released modules are this repository's own and the rest come from the
// cache the checksum database already vouched for.
func goEnv(ctx context.Context, proxyDir, modCache string) ([]string, error) {
	out, err := goOutput(ctx, "", nil, "env", "GOMODCACHE", "GOPROXY", "GOFLAGS")
	if err != nil {
		return nil, err
	}
	vals := strings.Split(out, "\n")
	for len(vals) < 3 { // the output's trailing empty values trimmed
		vals = append(vals, "")
	}
	cache, upstream, flags := vals[0], vals[1], vals[2]
	proxies := []string{"file://" + filepath.ToSlash(proxyDir), "file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download"))}
	if upstream != "" && upstream != "off" {
		proxies = append(proxies, upstream)
	}
	return append(os.Environ(),
		"GOPROXY="+strings.Join(proxies, ","),
		"GOMODCACHE="+modCache,
		// GOFLAGS keeps the caller's (make test's -trimpath, or go env
		// -w's): a go command here compiles what make test's did, from
		// the cache.
		"GOFLAGS="+strings.TrimSpace(flags+" -modcacherw"),
		"GOSUMDB=off",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	), nil
}
