#!/usr/bin/env bash
# Builds the exec plugins the native cloud logins stand beside —
# aws-iam-authenticator (EKS) and kubelogin (AKS) — from the Go module proxy,
# in the tools module hack/peers, and prints the directory that holds them:
# the value for AUTHVAULT_PEERS, which the cloud modules' peer tests and
# benchmarks read. Release downloads are not reachable from the machines this
# project runs on; the module proxy is.
#
# kubelogin is v0.2.21, not the newest v0.2.22: v0.2.22 asks for Go 1.26.10
# and the project builds with GOTOOLCHAIN=local on Go 1.26.8.
#
# The binaries are cached outside the work tree, keyed by name and version,
# so a second run prints the directory at once. Progress goes to stderr.
set -euo pipefail

IAM_VERSION=v0.6.13
KUBELOGIN_VERSION=v0.2.21

here=$(cd "$(dirname "$0")" && pwd)
cache=${AUTHVAULT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/authvault}
dir=$cache/peers/aws-iam-authenticator-$IAM_VERSION-kubelogin-$KUBELOGIN_VERSION-$(go env GOOS)-$(go env GOARCH)

if [ -x "$dir/aws-iam-authenticator" ] && [ -x "$dir/kubelogin" ]; then
  echo "$dir"
  exit 0
fi
# --cached: only tell whether they are built (hack/tools.sh).
[ "${1:-}" = --cached ] && exit 1

# One build at a time (make test's background build beside a make compat
# or soak-check started alone, a second make test): the rename below
# removes the directory another run may be starting an API server from.
mkdir -p "$cache"
# A build that holds the lock (another make test's, or one stopped with
# Ctrl-Z) is waited for, and named while it is.
. "$here/lock.sh"
take_lock peers "$cache/peers.lock"
if [ -x "$dir/aws-iam-authenticator" ] && [ -x "$dir/kubelogin" ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$cache"
work=$(mktemp -d "$cache/peers.XXXXXX")
trap 'rm -rf "$work"' EXIT

# build NAME PACKAGE [LDFLAGS]: go build with a progress line every 20 s,
# without debug information (no DWARF compiled or linked, no symbol table:
# nobody debugs these programs, and on a fresh machine they are the
# longest builds there are; panics still print their stacks),
# with Go's default cgo setting, not the CGO_ENABLED=0 make exports for
# the repository's own builds: the binaries are the same whoever builds
# them (make test or a hand), and one of them (kubelogin) needs cgo on
# macOS.
build() {
  local name=$1 pkg=$2 ldflags=${3:-}
  local start=$SECONDS
  echo "peers: building $name ($pkg) ..." >&2
  (cd "$here/peers" && env -u CGO_ENABLED go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" -o "$work/$name" "$pkg") &
  local pid=$!
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    [ $((waited % 20)) = 0 ] && kill -0 "$pid" 2>/dev/null && echo "peers: still building $name, $((SECONDS - start)) s" >&2
  done
  wait "$pid"
  echo "peers: built $name in $((SECONDS - start)) s" >&2
}

# -s -w: the binaries are run, never debugged; the version stamps are what
# each prints for `version`.
build aws-iam-authenticator sigs.k8s.io/aws-iam-authenticator/cmd/aws-iam-authenticator \
  "-X sigs.k8s.io/aws-iam-authenticator/pkg.Version=$IAM_VERSION"
build kubelogin github.com/Azure/kubelogin \
  "-X main.gitTag=$KUBELOGIN_VERSION"

mkdir -p "$(dirname "$dir")"
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
echo "$dir"
