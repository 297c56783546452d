#!/usr/bin/env bash
# Builds the envtest binaries (kube-apiserver and etcd) and kubectl from the
# Go module proxy, in the tools module hack/envtest, and prints the directory
# that holds them: the value for KUBEBUILDER_ASSETS. kubectl, at the API
# server's version, is for a person's kubectl proxy in front of the cluster
# (make dashboard) where none is installed. Release downloads are not
# reachable from the machines this project runs on; the module proxy is.
#
# The binaries are cached outside the work tree, keyed by version, so a second
# run prints the directory at once. A directory built before kubectl was
# added keeps its kube-apiserver and etcd: only kubectl is built into it.
# Progress goes to stderr.
set -euo pipefail

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.16

here=$(cd "$(dirname "$0")" && pwd)
cache=${AUTHVAULT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/authvault}
dir=$cache/envtest/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-$(go env GOOS)-$(go env GOARCH)

if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ] && [ -x "$dir/kubectl" ]; then
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
take_lock envtest "$cache/envtest.lock"
if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ] && [ -x "$dir/kubectl" ]; then
  echo "$dir"
  exit 0
fi

work=$(mktemp -d "$cache/envtest.XXXXXX" 2>/dev/null || { mkdir -p "$cache" && mktemp -d "$cache/envtest.XXXXXX"; })
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
  echo "envtest: building $name ($pkg) ..." >&2
  (cd "$here/envtest" && env -u CGO_ENABLED go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" -o "$work/$name" "$pkg") &
  local pid=$!
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    [ $((waited % 20)) = 0 ] && kill -0 "$pid" 2>/dev/null && echo "envtest: still building $name, $((SECONDS - start)) s" >&2
  done
  wait "$pid"
  echo "envtest: built $name in $((SECONDS - start)) s" >&2
}

version="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
version="$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"

# kube-apiserver and etcd already built (a directory from before kubectl
# was added): kubectl alone goes in beside them, renamed into place, so
# that an API server another run starts from the directory keeps running.
if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ]; then
  build kubectl k8s.io/kubernetes/cmd/kubectl "$version"
  mv "$work/kubectl" "$dir/kubectl"
  echo "$dir"
  exit 0
fi

build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$version"
build etcd go.etcd.io/etcd/server/v3
build kubectl k8s.io/kubernetes/cmd/kubectl "$version"

mkdir -p "$(dirname "$dir")"
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
echo "$dir"
