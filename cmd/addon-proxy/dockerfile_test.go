package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The image's Dockerfile is read as Docker reads it, line by line, and
// these tests hold it to what the sidecar needs (docker cannot run here):
// a static binary on a base without libc or shell, a numeric non-root
// user for runAsNonRoot, the entrypoint being what the build produced.

// dockerfile is what the tests read in a Dockerfile.
type dockerfile struct {
	args   map[string]string // ARGs before the first FROM, with their defaults
	stages []*stage
}

// stage is one FROM's instructions.
type stage struct {
	base, name      string
	args            map[string]string // ARGs declared in the stage, with their defaults
	env             map[string]string
	runs            []string // shell form, continuation lines joined
	user            string
	entrypoint      []string // exec form
	entrypointShell string   // shell form
	copies          []copyFrom
}

// copyFrom is a COPY --from.
type copyFrom struct {
	from string
	src  []string
	dest string
}

// parseDockerfile reads the instructions Docker would: comment lines are
// dropped (within continuations too), a trailing \ joins the next line.
func parseDockerfile(text string) (*dockerfile, error) {
	d := &dockerfile{args: map[string]string{}}
	var lines []string
	var cur strings.Builder
	for raw := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(raw)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if more, ok := strings.CutSuffix(t, `\`); ok {
			cur.WriteString(more + " ")
			continue
		}
		cur.WriteString(t)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		return nil, errors.New("the last instruction ends with a \\")
	}
	for _, line := range lines {
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		var s *stage
		if len(d.stages) > 0 {
			s = d.stages[len(d.stages)-1]
		}
		instr = strings.ToUpper(instr)
		if s == nil && instr != "FROM" && instr != "ARG" {
			return nil, fmt.Errorf("%s before the first FROM", instr)
		}
		switch instr {
		case "FROM":
			f := withoutFlags(strings.Fields(rest))
			if len(f) != 1 && (len(f) != 3 || !strings.EqualFold(f[1], "AS")) {
				return nil, fmt.Errorf("FROM %s: not an image [AS name]", rest)
			}
			s = &stage{base: f[0], args: map[string]string{}, env: map[string]string{}}
			if len(f) == 3 {
				s.name = f[2]
			}
			d.stages = append(d.stages, s)
		case "ARG":
			args := d.args
			if s != nil {
				args = s.args
			}
			for _, a := range strings.Fields(rest) {
				k, v, _ := strings.Cut(a, "=")
				args[k] = v
			}
		case "ENV":
			words, err := shellWords(rest)
			if err != nil {
				return nil, fmt.Errorf("ENV %s: %w", rest, err)
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return nil, fmt.Errorf("ENV %s: not key=value", rest)
				}
				s.env[k] = v
			}
		case "RUN":
			words := strings.Fields(rest)
			for len(words) > 0 && strings.HasPrefix(words[0], "--") { // --mount=...
				rest = strings.TrimSpace(strings.TrimPrefix(rest, words[0]))
				words = words[1:]
			}
			s.runs = append(s.runs, rest)
		case "USER":
			s.user = rest
		case "ENTRYPOINT":
			s.entrypoint, s.entrypointShell = nil, ""
			if strings.HasPrefix(rest, "[") {
				if err := json.Unmarshal([]byte(rest), &s.entrypoint); err != nil {
					return nil, fmt.Errorf("ENTRYPOINT %s: %w", rest, err)
				}
			} else {
				s.entrypointShell = rest
			}
		case "COPY":
			var c copyFrom
			var paths []string
			for _, w := range strings.Fields(rest) {
				if from, ok := strings.CutPrefix(w, "--from="); ok {
					c.from = from
				} else if !strings.HasPrefix(w, "--") {
					paths = append(paths, w)
				}
			}
			if c.from != "" && len(paths) >= 2 {
				c.src, c.dest = paths[:len(paths)-1], paths[len(paths)-1]
				s.copies = append(s.copies, c)
			}
		}
	}
	if len(d.stages) == 0 {
		return nil, errors.New("no FROM")
	}
	return d, nil
}

func withoutFlags(words []string) []string {
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		words = words[1:]
	}
	return words
}

// goBuild is the build command of the image's binary.
type goBuild struct {
	env  []string // the RUN's own assignments, and the stage's ENV
	argv []string // go build ...
	out  int      // argv's index of the -o value
}

// distrolessStatic is the base the image may run on beside scratch:
// distroless's static images have no libc, no shell, and a nonroot user
// 65532.
var distrolessStatic = regexp.MustCompile(`^gcr\.io/distroless/static(-debian\d+)?(:[\w.-]+)?(@sha256:[0-9a-f]{64})?$`)

// assignment is a shell word that sets a variable for the command.
var assignment = regexp.MustCompile(`^[A-Za-z_]\w*=`)

// checkImage holds d to what the sidecar's image needs and returns the
// go build command of the stage whose output the image runs, with the
// build arguments (TARGETOS...) as buildArgs gives them. goVersion is
// go.mod's go line: the builder must provide it, as the golang images
// do not download another toolchain (GOTOOLCHAIN=local).
func checkImage(d *dockerfile, buildArgs map[string]string, goVersion string) (goBuild, error) {
	final := d.stages[len(d.stages)-1]
	if final.base != "scratch" && !distrolessStatic.MatchString(final.base) {
		return goBuild{}, fmt.Errorf("the final stage runs on %s, not distroless static or scratch: a static binary wants no more", final.base)
	}
	uid, gid, hasGroup := strings.Cut(final.user, ":")
	if n, err := strconv.ParseUint(uid, 10, 32); err != nil || n == 0 {
		return goBuild{}, fmt.Errorf("the final stage's USER is %q, not a numeric user other than 0: runAsNonRoot cannot tell a name from root", final.user)
	}
	if _, err := strconv.ParseUint(gid, 10, 32); hasGroup && err != nil {
		return goBuild{}, fmt.Errorf("the final stage's USER is %q, whose group is not numeric", final.user)
	}
	if len(final.entrypoint) == 0 {
		return goBuild{}, fmt.Errorf("the final stage's ENTRYPOINT is %q, not the exec form [\"/binary\"]: the shell form needs a shell the base lacks", final.entrypointShell)
	}
	var from copyFrom
	for _, c := range final.copies {
		if c.dest == final.entrypoint[0] && len(c.src) == 1 {
			from = c
		}
	}
	if from.from == "" {
		return goBuild{}, fmt.Errorf("ENTRYPOINT %s is no file the final stage copies from a build stage", final.entrypoint[0])
	}
	var build *stage
	for i, s := range d.stages[:len(d.stages)-1] {
		if s.name == from.from || strconv.Itoa(i) == from.from {
			build = s
		}
	}
	if build == nil {
		return goBuild{}, fmt.Errorf("COPY --from=%s names no earlier stage", from.from)
	}
	image, tag, _ := strings.Cut(build.base, ":")
	if image != "golang" && image != "docker.io/library/golang" || !sameMinor(tag, goVersion) {
		return goBuild{}, fmt.Errorf("the build stage runs on %s, not golang:%s, the Go of go.mod", build.base, minorOf(goVersion))
	}

	// A RUN sees the ARGs its stage declares: given to the build, or
	// their defaults (the stage's, or the global one's).
	vars := map[string]string{}
	for k, v := range build.args {
		if v == "" {
			v = d.args[k]
		}
		if b, ok := buildArgs[k]; ok {
			v = b
		}
		vars[k] = v
	}
	env := map[string]string{}
	for k, v := range build.env {
		vars[k], env[k] = v, v
	}
	for _, run := range build.runs {
		words, err := shellWords(os.Expand(run, func(k string) string { return vars[k] }))
		if err != nil {
			return goBuild{}, fmt.Errorf("RUN %s: %w", run, err)
		}
		i := 0
		for ; i < len(words) && assignment.MatchString(words[i]); i++ {
			k, v, _ := strings.Cut(words[i], "=")
			env[k] = v
		}
		argv := words[i:]
		if len(argv) < 2 || argv[0] != "go" || argv[1] != "build" {
			continue
		}
		b := goBuild{argv: argv, out: -1}
		for k, v := range env {
			b.env = append(b.env, k+"="+v)
		}
		var trimpath bool
		var ldflags string
		for j, a := range argv {
			switch {
			case a == "-o" && j+1 < len(argv):
				b.out = j + 1
			case a == "-trimpath":
				trimpath = true
			case strings.HasPrefix(a, "-ldflags="):
				ldflags = strings.TrimPrefix(a, "-ldflags=")
			case a == "-ldflags" && j+1 < len(argv):
				ldflags = argv[j+1]
			}
		}
		switch {
		case env["CGO_ENABLED"] != "0":
			return goBuild{}, fmt.Errorf("RUN %s: CGO_ENABLED is %q, not 0: the binary would need the libc the base lacks", run, env["CGO_ENABLED"])
		case !trimpath:
			return goBuild{}, fmt.Errorf("RUN %s: no -trimpath: the binary would hold the builder's paths", run)
		case !slicesContainAll(strings.Fields(ldflags), "-s", "-w"):
			return goBuild{}, fmt.Errorf("RUN %s: -ldflags %q lacks -s -w", run, ldflags)
		case b.out < 0 || argv[b.out] != from.src[0]:
			return goBuild{}, fmt.Errorf("RUN %s: its -o is not %s, which the final stage copies", run, from.src[0])
		}
		return b, nil
	}
	return goBuild{}, fmt.Errorf("the build stage %s has no RUN of a single go build command", from.from)
}

func slicesContainAll(have []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// minorOf is "1.26" of "1.26.0" or "1.26rc1".
func minorOf(v string) string { return minor.FindString(v) }

var minor = regexp.MustCompile(`^\d+\.\d+`)

// sameMinor tells whether an image tag ("1.26", "1.26.3-trixie") is of
// the Go minor version v is of.
func sameMinor(tag, v string) bool {
	m := minorOf(v)
	return m != "" && (tag == m || strings.HasPrefix(tag, m+".") || strings.HasPrefix(tag, m+"-"))
}

// shellWords splits a simple shell command into its words: quotes group,
// a backslash escapes outside single quotes. Operators (&&, ;, |) and
// substitutions are not read: a RUN with them is not one command.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for i := 0; i < len(s); i++ {
		c := rune(s[i])
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				w.WriteRune(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s):
				i++
				w.WriteByte(s[i])
			default:
				w.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case strings.ContainsRune("&;|<>`$()", c):
			return nil, fmt.Errorf("%q is not one simple command", s)
		default:
			w.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: an unclosed quote", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// readDockerfile reads this directory's Dockerfile and the module's Go
// version.
func readDockerfile(t *testing.T) (text, goVersion string) {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.GoVersion}}").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go list -m: the module's go version: %q, %v", out, err)
	}
	return string(data), strings.TrimSpace(string(out))
}

// imageBuildArgs are the build arguments docker gives a build for this
// machine's platform.
func imageBuildArgs(goos, goarch string) map[string]string {
	return map[string]string{
		"TARGETOS": goos, "TARGETARCH": goarch, "TARGETPLATFORM": goos + "/" + goarch,
		"BUILDOS": goos, "BUILDARCH": goarch, "BUILDPLATFORM": goos + "/" + goarch,
	}
}

// The Dockerfile builds a static binary and runs it as a numeric
// non-root user on distroless static; each way of breaking that is
// refused.
func TestDockerfile(t *testing.T) {
	text, goVersion := readDockerfile(t)
	args := imageBuildArgs("linux", "amd64")
	d, err := parseDockerfile(text)
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkImage(d, args, goVersion)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the image's build: %s %s", strings.Join(b.env, " "), strings.Join(b.argv, " "))
	if !slicesContainAll(b.env, "GOOS=linux", "GOARCH=amd64") {
		t.Errorf("build env %q: want the target's GOOS and GOARCH (a cross-build on the build machine)", b.env)
	}

	for _, tc := range []struct{ name, old, new string }{
		{"a base with libc", "FROM gcr.io/distroless/static-debian12:nonroot", "FROM gcr.io/distroless/base-debian12:nonroot"},
		{"a distribution base", "FROM gcr.io/distroless/static-debian12:nonroot", "FROM debian:12-slim"},
		{"a named user", "USER 65532:65532", "USER nonroot:nonroot"},
		{"root", "USER 65532:65532", "USER 0"},
		{"a named group", "USER 65532:65532", "USER 65532:nonroot"},
		{"no user", "USER 65532:65532\n", ""},
		{"cgo", "CGO_ENABLED=0 ", "CGO_ENABLED=1 "},
		{"cgo by default", "CGO_ENABLED=0 ", ""},
		{"no -trimpath", "-trimpath ", ""},
		{"symbols kept", "-ldflags='-s -w'", "-ldflags='-w'"},
		{"a shell entrypoint", `ENTRYPOINT ["/addon-proxy"]`, "ENTRYPOINT /addon-proxy"},
		{"an entrypoint not copied", `ENTRYPOINT ["/addon-proxy"]`, `ENTRYPOINT ["/bin/addon-proxy"]`},
		{"another file copied", "COPY --from=build /out/addon-proxy", "COPY --from=build /out/other"},
		{"a build in several commands", "RUN CGO_ENABLED=0", "RUN true && CGO_ENABLED=0"},
		{"an older Go", "golang:1.26 AS", "golang:1.25 AS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := strings.Replace(text, tc.old, tc.new, 1)
			if broken == text {
				t.Fatalf("the Dockerfile has no %q to break", tc.old)
			}
			d, err := parseDockerfile(broken)
			if err == nil {
				_, err = checkImage(d, args, goVersion)
			}
			if err == nil {
				t.Fatalf("a Dockerfile with %q for %q passes", tc.new, tc.old)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestShellWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`CGO_ENABLED=0 go build -ldflags='-s -w' -o /out/x ./cmd/x`, []string{"CGO_ENABLED=0", "go", "build", "-ldflags=-s -w", "-o", "/out/x", "./cmd/x"}},
		{`go  build "-ldflags=-X 'a.b=c d'" a\ b`, []string{"go", "build", "-ldflags=-X 'a.b=c d'", "a b"}},
		{`x ''`, []string{"x", ""}},
	} {
		got, err := shellWords(tc.in)
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("shellWords(%s) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{`a && b`, `a; b`, `a | b`, `a $(b)`, "a `b`", `a 'b`, `a "b`} {
		if got, err := shellWords(in); err == nil {
			t.Errorf("shellWords(%s) = %q, want an error", in, got)
		}
	}
}

// The context keeps .git, so that go build stamps the version, and every
// file git tracks, so that the stamp is not "+dirty".
func TestDockerignore(t *testing.T) {
	data, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if p := excludesGit(string(data)); p != "" {
		t.Errorf(".dockerignore's %q leaves .git out of the context: --version would say (devel)", p)
	}
	for _, bad := range []string{".git", "/.git", ".g*", "*", "**", "**/.git", ".git/"} {
		if excludesGit(bad+"\n") == "" {
			t.Errorf("%q is not seen to leave .git out", bad)
		}
	}
	// Patterns without a slash match at any depth for git and at the
	// root only for docker: git's list is the longer, so none is enough.
	out, err := gitOutput(t, "ls-files", "--cached", "--ignored", "--exclude-from=.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if out != "" {
		t.Errorf(".dockerignore leaves out files git tracks (the version would say +dirty):\n%s", out)
	}
}

// excludesGit returns the pattern of a .dockerignore that excludes .git,
// or "".
func excludesGit(dockerignore string) string {
	for line := range strings.SplitSeq(dockerignore, "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") || strings.HasPrefix(p, "!") {
			continue
		}
		q := path.Clean(strings.TrimPrefix(p, "/"))
		for {
			if q == "**" {
				return p
			}
			if ok, _ := path.Match(q, ".git"); ok {
				return p
			}
			rest, ok := strings.CutPrefix(q, "**/")
			if !ok {
				break
			}
			q = rest
		}
	}
	return ""
}
