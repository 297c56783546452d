package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// --dir may hold files that are not the program's (CLUSTER_DIR=~/.kube), or
// those of a cluster still running there: the program refuses to start
// rather than replace them and remove them when it stops, and says why.
func TestClusterLeavesOtherFilesAlone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // in the error
	}{
		{"a kubeconfig of the user's", map[string]string{"kubeconfig": "mine\n"}, "kubeconfig"},
		{"a token of the user's", map[string]string{"token": "mine\n"}, "token"},
		{"a pid file that is no pid", map[string]string{"pid": "mine\n"}, "pid"},
		{"a cluster running there", map[string]string{"pid": strconv.Itoa(os.Getpid()) + "\n", "token": "its token\n"}, "already runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // were it to start, it would stop at once
			var out strings.Builder
			err := run(ctx, options{dir: dir}, nil, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run with %s in its directory = %v, want an error that names %q", tc.name, err, tc.want)
			}
			for name, content := range tc.files {
				if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != content {
					t.Errorf("%s after run: %v, %d bytes; want it as it was", name, err, len(got))
				}
			}
		})
	}
}

// The files of a run that ended without removing them (SIGKILL) are the
// program's to replace.
func TestCheckDirTakesAnEndedRunsFiles(t *testing.T) {
	dir := t.TempDir()
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"pid": strconv.Itoa(ended.Process.Pid) + "\n", "token": "old\n", "kubeconfig": "old\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkDir(dir); err != nil {
		t.Errorf("checkDir with an ended run's files = %v, want nil", err)
	}
	if err := checkDir(t.TempDir()); err != nil {
		t.Errorf("checkDir of an empty directory = %v, want nil", err)
	}
	if err := checkDir(filepath.Join(t.TempDir(), "absent")); err != nil {
		t.Errorf("checkDir of a directory not made yet = %v, want nil", err)
	}
}

// The directories a run made go when it stops, but not one that someone
// put a file of theirs in meanwhile, nor its parents.
func TestRemoveMadeLeavesOthersFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "bin", "cluster")
	made := missingDirs(dir)
	if len(made) != 2 || made[0] != dir || made[1] != filepath.Join(root, "bin") {
		t.Fatalf("missingDirs = %q, want %s and its parent", made, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(root, "bin", "mine")
	if err := os.WriteFile(mine, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := removeMade(made); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is left (%v)", dir, err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("the other file is gone: %v", err)
	}
}
