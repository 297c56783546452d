package main

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The image's binary, built by the Dockerfile's own go build command in
// the environment of the golang image: it is static, so it runs on a base
// without libc; --version prints the version git gave the build; --help
// lists every flag deploy/ gives it.
func TestImage(t *testing.T) {
	text, goVersion := readDockerfile(t)
	d, err := parseDockerfile(text)
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkImage(d, imageBuildArgs("linux", runtime.GOARCH), goVersion)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "addon-proxy")
	argv := slices.Clone(b.argv)
	argv[b.out] = bin
	build := exec.Command(argv[0], argv[1:]...)
	build.Dir = "../.." // the build context, the builder's WORKDIR
	// The golang image sets no GOFLAGS, so go build stamps the version
	// from git (-buildvcs=auto, whatever GOFLAGS say here, in the
	// environment or in go env's file), and runs only its own toolchain.
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=auto", "GOTOOLCHAIN=local")
	build.Env = append(build.Env, b.env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	if err := staticELF(bin); err != nil {
		t.Error(err)
	}

	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("addon-proxy --version: %v\n%s", err, out)
	}
	version := moduleVersion(t, bin)
	if got, want := strings.TrimSpace(string(out)), "addon-proxy "+version+" "; !strings.HasPrefix(got, want) {
		t.Errorf("--version = %q, want it to start with %q", got, want)
	}
	if _, err := gitOutput(t, "rev-parse", "HEAD"); err == nil && version == "(devel)" {
		t.Errorf("built in a git checkout, the binary's version is %s: the build did not stamp it", version)
	}
	t.Logf("--version: %s", strings.TrimSpace(string(out)))

	help, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("addon-proxy --help: %v\n%s", err, help)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(string(help), -1) {
		flags[m[1]] = true
	}
	if !flags["audience"] || !flags["upstream"] {
		t.Fatalf("--help lists %d flags, not --audience and --upstream:\n%s", len(flags), help)
	}
	deployed, _ := deployedSidecar(t)
	for _, arg := range deployed.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if strings.HasPrefix(arg, "-") && !flags[name] {
			t.Errorf("deploy/ gives the sidecar %s, a flag --help does not list", arg)
		}
	}
}

// staticELF tells why the ELF binary at path would not run without libc,
// if it would not.
func staticELF(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var errs []error
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			errs = append(errs, fmt.Errorf("%s asks for a dynamic loader (PT_INTERP)", filepath.Base(path)))
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	if len(libs) > 0 {
		errs = append(errs, fmt.Errorf("%s needs shared libraries (DT_NEEDED) %q", filepath.Base(path), libs))
	}
	return errors.Join(errs...)
}

// staticELF tells a binary that links libc: what the image's build would
// give with cgo.
func TestStaticELFSeesDynamicBinaries(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module cgo\n\ngo 1.26\n",
		"main.go": "package main\n\n// int two(void) { return 2; }\nimport \"C\"\n\nfunc main() { println(C.two()) }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "cgo")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build with cgo (the race detector needs a C compiler too): %v\n%s", err, out)
	}
	err := staticELF(bin)
	if err == nil {
		t.Fatal("staticELF of a cgo binary = nil, want an error")
	}
	for _, want := range []string{"PT_INTERP", "DT_NEEDED"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("staticELF of a cgo binary = %v, want it to name %s", err, want)
		}
	}
}

// moduleVersion is the version of the main module the build recorded in
// bin, as go version -m reads it.
func moduleVersion(t *testing.T, bin string) string {
	t.Helper()
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(meta)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/authvault/authvault" {
			return f[2]
		}
	}
	t.Fatalf("go version -m names no main module:\n%s", meta)
	return ""
}

// gitOutput runs git in the module's root.
func gitOutput(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}
