package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// make release hands VERSION to the release tool as one argument, whatever
// it holds: a quote in it ends no string of the recipe's shell, so nothing
// of it runs as a command. GO=true stands for the go command, so that the
// test builds nothing and the tool never runs.
func TestMakeReleasePassesVersionAsOneArgument(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make release is what users run: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top, err := git(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatal(err)
	}
	pwned := filepath.Join(t.TempDir(), "pwned")
	for _, version := range []string{
		`v0.1.0"; touch ` + pwned + `; echo "`,
		`v0.1.0 $(touch ` + pwned + `)`,
		"v0.1.0`touch " + pwned + "`",
		`v0.1.0'; touch ` + pwned + `; echo '`,
	} {
		cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", top, "GO=true", "release", "VERSION="+version)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("make release VERSION=%q: %v\n%s", version, err, out)
		}
		if _, err := os.Stat(pwned); err == nil {
			t.Fatalf("make release VERSION=%q ran a command of VERSION's (%s exists); make printed %q", version, pwned, strings.TrimSpace(string(out)))
		}
	}
}
