package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// published is one published module of the repository.
type published struct {
	dir  string // relative to the repository's top, "" for the root module
	path string
}

// tag is the module's tag for version: Go finds a nested module's version
// under a tag prefixed with the module's directory.
func (m published) tag(version string) string {
	if m.dir == "" {
		return version
	}
	return m.dir + "/" + version
}

// undoTimeout bounds the undoing of a refused release: a few local git
// commands.
const undoTimeout = time.Minute

// release makes version's release commit and tags in the repository that
// holds dir, or returns why not with the repository as it was.
func release(ctx context.Context, dir, version string, out io.Writer) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	repo, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	mods, err := publishedModules(repo)
	if err != nil {
		return err
	}
	if branch, err := git(ctx, repo, "rev-parse", "--abbrev-ref", "HEAD"); err != nil {
		return err
	} else if branch != "main" {
		return fmt.Errorf("release: HEAD is %s: releases are made from main", branch)
	}
	if status, err := git(ctx, repo, "status", "--porcelain"); err != nil {
		return err
	} else if status != "" {
		first, _, _ := strings.Cut(status, "\n")
		return fmt.Errorf("release: the tree has changes not committed (%s, …): commit or stash them first", first[min(3, len(first)):])
	}
	tagList, err := git(ctx, repo, "tag", "--list")
	if err != nil {
		return err
	}
	tags := strings.Fields(tagList)
	for _, m := range mods {
		if slices.Contains(tags, m.tag(version)) {
			return fmt.Errorf("release: %s is tagged already: a released version is never made again; choose the next one", m.tag(version))
		}
	}
	if newest := newestTag(mods, tags, true); newest != "" {
		if _, v := splitTag(newest); semver.Compare(version, v) < 0 {
			return fmt.Errorf("release: %s is older than the newest release, %s", version, newest)
		}
	}
	// The API is compared with the last release that is not a pre-release:
	// a candidate is compared with what it is a candidate to follow, and a
	// release after its candidates with the same, not with the candidate
	// before it (gorelease suggests the candidate's own version for
	// anything that follows a pre-release).
	previous := newestRelease(tags)
	if err := checkChangelog(filepath.Join(repo, "CHANGELOG.md"), version); err != nil {
		return err
	}
	if err := checkReplaces(repo, mods); err != nil {
		return err
	}

	head, err := git(ctx, repo, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	var made []string
	// undo runs when ctx has ended too (an interrupt), so it has a context
	// of its own. It deletes every tag of version, not only those made:
	// git may have written a tag and then failed or been stopped, and none
	// of them existed before.
	undo := func(cause error) error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		defer cancel()
		now, err := git(ctx, repo, "tag", "--list")
		if err != nil {
			cause = errors.Join(cause, err)
		}
		for _, m := range mods {
			if t := m.tag(version); slices.Contains(strings.Fields(now), t) {
				if _, err := git(ctx, repo, "tag", "--delete", t); err != nil {
					cause = errors.Join(cause, err)
				}
			}
		}
		if _, err := git(ctx, repo, "reset", "--quiet", "--hard", head); err != nil {
			cause = errors.Join(cause, err)
		}
		return cause
	}
	if err := requireRoot(repo, mods, version); err != nil {
		return undo(err)
	}
	if _, err := git(ctx, repo, "commit", "--quiet", "--allow-empty", "--all", "--message", "Release "+version); err != nil {
		return undo(err)
	}
	for _, m := range mods {
		if _, err := git(ctx, repo, "tag", "--annotate", "--message", m.path+" "+version, m.tag(version)); err != nil {
			return undo(err)
		}
		made = append(made, m.tag(version))
	}
	if err := checkCompatibility(ctx, repo, mods, previous, version, out); err != nil {
		return undo(err)
	}
	// --atomic: if main is refused (it moved on), no tag is pushed either.
	fmt.Fprintf(out, "released %s: the release commit is HEAD and the tags are %s\npush them with: git push --atomic origin main %s\n",
		version, strings.Join(made, " "), strings.Join(made, " "))
	return nil
}

// checkVersion accepts a semantic version as Go modules use it: v, then
// MAJOR.MINOR.PATCH, an optional pre-release, and no build metadata, which
// the go command does not carry.
func checkVersion(version string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Build(version) != "" {
		return fmt.Errorf("release: VERSION %q is not a semantic version as Go modules take it: vMAJOR.MINOR.PATCH, e.g. v0.1.0", version)
	}
	return nil
}

// publishedModules are the root module and every module under cloud/:
// the modules users fetch. The demo and the tools modules under hack/ are
// not published.
func publishedModules(repo string) ([]published, error) {
	root, err := modulePath(filepath.Join(repo, "go.mod"))
	if err != nil {
		return nil, err
	}
	mods := []published{{path: root}}
	nested, err := filepath.Glob(filepath.Join(repo, "cloud", "*", "go.mod"))
	if err != nil {
		return nil, err
	}
	for _, gomod := range nested {
		dir := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(gomod, repo+string(filepath.Separator))))
		path, err := modulePath(gomod)
		if err != nil {
			return nil, err
		}
		if path != root+"/"+dir {
			return nil, fmt.Errorf("release: %s declares module %s: a nested module's path must be the root's path and its directory, %s", gomod, path, root+"/"+dir)
		}
		mods = append(mods, published{dir: dir, path: path})
	}
	return mods, nil
}

// modulePath reads the module path a go.mod declares.
func modulePath(gomod string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	path := modfile.ModulePath(data)
	if path == "" {
		return "", fmt.Errorf("release: %s declares no published path", gomod)
	}
	return path, nil
}

// newestRelease is the highest root release tag (vX.Y.Z, no pre-release)
// among tags, or "".
func newestRelease(tags []string) string {
	newest := ""
	for _, t := range tags {
		if checkVersion(t) == nil && semver.Prerelease(t) == "" && semver.Compare(t, newest) > 0 {
			newest = t
		}
	}
	return newest
}

// newestTag is the tag of the highest version of any module of mods among
// tags (pre-releases too when pre is set), or "".
func newestTag(mods []published, tags []string, pre bool) string {
	newest, newestVersion := "", ""
	for _, t := range tags {
		dir, v := splitTag(t)
		if checkVersion(v) != nil || (!pre && semver.Prerelease(v) != "") ||
			!slices.ContainsFunc(mods, func(m published) bool { return m.dir == dir }) {
			continue
		}
		if semver.Compare(v, newestVersion) > 0 {
			newest, newestVersion = t, v
		}
	}
	return newest
}

// splitTag splits a module's tag into the module's directory ("" for the
// root) and the version.
func splitTag(tag string) (dir, version string) {
	i := strings.LastIndexByte(tag, '/')
	if i < 0 {
		return "", tag
	}
	return tag[:i], tag[i+1:]
}

// changelogSection matches a released version's heading in a changelog
// kept as keepachangelog.com 1.1.0 says: "## [1.2.3] - 2006-01-02".
var changelogSection = regexp.MustCompile(`(?m)^## \[([^\]]+)\] - (.*?)[ \t]*$`)

// checkChangelog requires a section for version, dated, with something
// under it. A heading in a code block or an HTML comment (an example, a
// plan) is not a section, and a comment is not something. The file itself
// must be the changelog: a symbolic link may lead out of the release.
func checkChangelog(path, version string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("release: CHANGELOG.md is a symbolic link: the changelog a release carries is a file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("release: every release has a section in CHANGELOG.md: %w", err)
	}
	data = prose(data)
	want := strings.TrimPrefix(version, "v")
	sections := changelogSection.FindAllSubmatchIndex(data, -1)
	for i, s := range sections {
		if string(data[s[2]:s[3]]) != want {
			continue
		}
		if _, err := time.Parse(time.DateOnly, string(data[s[4]:s[5]])); err != nil {
			return fmt.Errorf("release: CHANGELOG.md: the section of %s is dated %q, not YYYY-MM-DD", version, data[s[4]:s[5]])
		}
		end := len(data)
		if i+1 < len(sections) {
			end = sections[i+1][0]
		}
		if len(bytes.TrimSpace(data[s[1]:end])) == 0 {
			return fmt.Errorf("release: CHANGELOG.md: the section of %s says nothing", version)
		}
		return nil
	}
	return fmt.Errorf("release: CHANGELOG.md has no section for %s: add \"## [%s] - YYYY-MM-DD\" with what changed, from [Unreleased]", version, want)
}

// prose is a Markdown text with its fenced code blocks and HTML comments
// blanked out, line breaks kept, so that a line of it is text or nothing.
// A comment that does not end hides the rest.
func prose(md []byte) []byte {
	out := slices.Clone(md)
	blank := func(from, to int) {
		for i := from; i < to; i++ {
			if out[i] != '\n' {
				out[i] = ' '
			}
		}
	}
	fence := "" // the open code block's fence, "" outside one
	for start := 0; start < len(md); {
		end := len(md)
		if i := bytes.IndexByte(md[start:], '\n'); i >= 0 {
			end = start + i + 1
		}
		line := strings.TrimRight(string(md[start:end]), " \t\r\n")
		text := strings.TrimLeft(line, " ")
		opens := len(line)-len(text) < 4 && (strings.HasPrefix(text, "```") || strings.HasPrefix(text, "~~~"))
		switch {
		case fence != "":
			if opens && strings.HasPrefix(text, fence) && strings.Trim(text, fence[:1]) == "" {
				fence = ""
			}
			blank(start, end)
		case opens:
			fence = text[:len(text)-len(strings.TrimLeft(text, text[:1]))]
			blank(start, end)
		}
		start = end
	}
	for from := 0; ; {
		open := bytes.Index(out[from:], []byte("<!--"))
		if open < 0 {
			return out
		}
		open += from
		end := len(out)
		if close := bytes.Index(out[open+4:], []byte("-->")); close >= 0 {
			end = open + 4 + close + 3
		}
		blank(open, end)
		from = end
	}
}

// checkReplaces requires every nested module to replace the root module by
// the working tree (replace ROOT => ../..), for any version: the release
// makes them require the root at the release's version, and work in the
// repository must go on building against the tree, never against a
// published root.
func checkReplaces(repo string, mods []published) error {
	for _, m := range mods[1:] {
		gomod := filepath.Join(repo, m.dir, "go.mod")
		data, err := os.ReadFile(gomod)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		f, err := modfile.Parse(gomod, data, nil)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		tree := slices.ContainsFunc(f.Replace, func(r *modfile.Replace) bool {
			return r.Old.Path == mods[0].path && r.Old.Version == "" && r.New.Version == "" &&
				modfile.IsDirectoryPath(r.New.Path) && filepath.Join(repo, m.dir, filepath.FromSlash(r.New.Path)) == repo
		})
		if !tree {
			rel, _ := filepath.Rel(filepath.Join(repo, m.dir), repo)
			return fmt.Errorf("release: %s/go.mod does not replace %s by the working tree (replace %s => %s), which work in the repository builds against",
				m.dir, mods[0].path, mods[0].path, filepath.ToSlash(rel))
		}
	}
	return nil
}

// requireRoot makes every nested module require the root module at
// version. Their replace of the root by the working tree stays: the go
// command ignores a dependency's replace directives, so users resolve the
// root at version, while work in the repository builds against the tree.
func requireRoot(repo string, mods []published, version string) error {
	for _, m := range mods[1:] {
		gomod := filepath.Join(repo, m.dir, "go.mod")
		data, err := os.ReadFile(gomod)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		f, err := modfile.Parse(gomod, data, nil)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if err := f.AddRequire(mods[0].path, version); err != nil {
			return fmt.Errorf("release: %s: %w", gomod, err)
		}
		f.Cleanup()
		out, err := f.Format()
		if err != nil {
			return fmt.Errorf("release: %s: %w", gomod, err)
		}
		if err := os.WriteFile(gomod, out, 0o644); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	return nil
}

// git runs git in dir and returns its output, trimmed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("release: git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimRight(string(out), " \t\n"), nil
}
