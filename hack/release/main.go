// Command release makes a release of authvault's published modules locally:
// the release commit, in which every cloud module requires the root module
// at the release's version, and one tag per published module (v0.1.0,
// cloud/eks/v0.1.0, …). It pushes nothing; it prints the push command, an
// atomic one, so that a refused main leaves no tag pushed.
//
//	go run ./hack/release -version v0.1.0    (make release VERSION=v0.1.0)
//
// It refuses, changing nothing, a version that is not semver, older than
// the newest tag of a published module or already tagged, one that
// CHANGELOG.md has no section for, a dirty tree, a branch other than main,
// a nested module that does not replace the root by the working tree, and a
// release whose version is less than what its API changes since the last
// release (pre-releases aside) call for, or that gorelease finds unfit
// (gorelease's verdict on every published module). A pre-release counts as
// the version it is a candidate for: v0.2.0-rc.1 may carry a minor's
// changes. An interrupt (Ctrl-C) undoes what was made.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	version := flag.String("version", "", "the version to release, vMAJOR.MINOR.PATCH")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.Getwd()
	if err == nil {
		err = release(ctx, dir, *version, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
