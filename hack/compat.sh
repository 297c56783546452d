#!/usr/bin/env bash
# compat.sh [--build] CONTROLLER_RUNTIME CLIENT_GO PATTERN...: builds and
# vets every package of every module of the workspace (hack/all.work) with
# controller-runtime and the Kubernetes libraries at the versions given, in
# place of the oldest ones go.mod requires, and runs the unit tests that
# can differ with them.
#
# --build stops after the vet and the compilation of the packages of the
# tests it would run, which fill the go build cache: make test runs it
# early, at the lowest priority, on what the cores leave idle while
# go-test's tests wait on servers and timers; the run without --build then
# finds its packages compiled, and links and runs the tests.
#
# How: a workspace of hack/all.work's modules and one more, made here, that
# requires the versions given; the go command selects, for all modules at
# once, what go get would have upgraded each to (minimal version selection
# over every go.mod). go.mod and go.sum stay as they are; the workspace and
# its go.work.sum live in a temporary directory, removed on exit. One go
# vet and one go test over all modules build each package once.
#
# Which tests run: those of a package whose test binary holds a package
# whose module is at another version than with go.mod's requirements (go
# list -deps -test, compared). The others are the same code with the same
# libraries, so they would run the same: they run once, in make test's
# go-test stage, under -race. So do the integration suites (integration,
# integration/restart), which run against a real API server there, and
# these tests build with the repository's own go.mod whatever the
# workspace says, so here they would test nothing new: hack/release's (it
# publishes the modules and fetches them alone) and addon-proxy's image
# build (TestImage, TestStaticELFSeesDynamicBinaries), and the sharded
# fleet's bench (TestBenchRunsEveryPhase: a minute of replica processes
# whose code is fleet's, which compat tests in fleet's own tests). The tests run
# without -race: go-test runs them under it; here the question is whether
# the code behaves the same with another release of the libraries, and
# -race would double the time. They skip go test's own vet (-vet=off),
# which the go vet above covers with every analyzer: its smaller set would
# analyse every dependency once more. The cloud modules' tests need
# KUBEBUILDER_ASSETS and AUTHVAULT_PEERS, as in make test; the test
# binaries run without GOWORK, as in make test (the Makefile's TEST_EXEC).
#
# The tests run in the order of the patterns, so that make test's list,
# the slowest first, starts them first.
#
# Builds are not -race, without cgo and with -trimpath: the configuration
# of make test's other builds that are not -race (staticcheck, and the
# programs tests build: the image's, the release's), whose compiled
# packages of the versions both share are then this script's too.
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=
if [ "${1:-}" = --build ]; then
	build_only=1
	shift
fi
if [ $# -lt 3 ]; then
	echo "usage: $0 [--build] CONTROLLER_RUNTIME CLIENT_GO PATTERN..." >&2
	exit 2
fi
export CGO_ENABLED=0
GOFLAGS="$(go env GOFLAGS | tr ' ' '\n' | { grep -vx -- -trimpath || true; } | tr '\n' ' ')-trimpath"
export GOFLAGS
cr=$1 kube=$2
shift 2
base=$PWD/hack/all.work
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/minor"
cat >"$tmp/minor/go.mod" <<EOF
module compat.invalid/minor

$(grep '^go ' "$base")

require (
	sigs.k8s.io/controller-runtime $cr
	k8s.io/client-go $kube
	k8s.io/api $kube
	k8s.io/apimachinery $kube
)
EOF
{
	grep '^go ' "$base"
	GOWORK=$base go list -m -f 'use {{printf "%q" .Dir}}'
	echo "use \"$tmp/minor\""
} >"$tmp/go.work"
minor=$tmp/go.work

echo "compat: $(GOWORK=$minor go list -m -f '{{.Path}} {{.Version}}' sigs.k8s.io/controller-runtime k8s.io/client-go | tr '\n' ' ')" >&2
GOWORK=$minor go vet "$@"

# modules FILE GOWORK: each package the patterns' tests build, with its
# module's path and version.
modules() {
	GOWORK=$2 go list -deps -test -f '{{.ImportPath}} {{with .Module}}{{.Path}}@{{.Version}}{{with .Replace}}=>{{.Path}}@{{.Version}}{{end}}{{end}}' "${@:3}" |
		sort -u >"$1"
}
modules "$tmp/base" "$base" "$@"
modules "$tmp/minor.txt" "$minor" "$@"
comm -13 "$tmp/base" "$tmp/minor.txt" | awk '{ print $1 }' >"$tmp/changed"

# Each test binary (p.test) and its dependencies, the suffix " [p.test]" of
# a package recompiled for a test dropped; the binaries holding a changed
# package name the packages to test.
GOWORK=$minor go list -test -f '{{if eq .Name "main"}}{{.ImportPath}}{{range .Deps}} {{.}}{{end}}{{end}}' "$@" |
	sed -E 's/ \[[^]]*\]//g' | awk -v changed="$tmp/changed" '
		BEGIN { while ((getline p < changed) > 0) c[p] = 1 }
		$1 ~ /\.test$/ { for (i = 2; i <= NF; i++) if ($i in c) { print substr($1, 1, length($1) - 5); break } }
	' | { grep -Ev '/(integration|integration/restart|hack/release)$' || [ $? = 1 ]; } >"$tmp/test"
GOWORK=$minor go list -test -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' "$@" | sed -n 's/\.test$//p' | sort >"$tmp/all"
echo "compat: $(wc -l <"$tmp/test") of $(wc -l <"$tmp/all") test packages build a package of another version; the others run in go-test only:" >&2
comm -23 "$tmp/all" <(sort "$tmp/test") | sed 's/^/compat:   /' >&2
if [ -n "$build_only" ]; then
	# Every package those tests link, compiled (export data is the
	# compiler's output); the binaries link when they run.
	if [ -s "$tmp/test" ]; then
		GOWORK=$minor go list -export -deps -test $(cat "$tmp/test") >/dev/null
	fi
	exit 0
fi
if [ -s "$tmp/test" ]; then
	GOWORK=$minor go test -vet=off -count=1 -timeout 20m -exec 'env -u GOWORK' -skip '^(TestImage|TestStaticELFSeesDynamicBinaries|TestBenchRunsEveryPhase)$' $(cat "$tmp/test")
fi
