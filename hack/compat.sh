#!/usr/bin/env bash
# compat.sh CONTROLLER_RUNTIME CLIENT_GO [vet|test]: builds and vets every
# package of the root module and of the cloud modules with controller-runtime
# and the Kubernetes libraries at the versions given, in place of the oldest
# ones go.mod requires, and with "test" runs the unit tests too (every
# package of every module but the integration suite; the cloud modules' need
# KUBEBUILDER_ASSETS and AUTHVAULT_PEERS, as in make test). They run without -race: make test's
# go-test stage runs them, and the integration suite, under -race with
# go.mod's versions; here the question is whether the code behaves the same
# with another release of the libraries, and -race would double the time.
# Left out too: what builds with the repository's own go.mod whatever
# -modfile says (hack/release's published modules, addon-proxy's image),
# and integration/restart, a part of the integration suite. go.mod and go.sum stay
# as they are: each module gets a copy to upgrade (go's -modfile), in a
# temporary directory removed on exit.
set -euo pipefail
cr=$1 kube=$2 what=${3:-test}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
upgrade() { # upgrade MODULE_DIR NAME: prints the -modfile flag for the module
	local dir=$1 mod=$tmp/$2.mod
	cp "$dir/go.mod" "$mod"
	cp "$dir/go.sum" "${mod%.mod}.sum"
	(cd "$dir" && go get -modfile="$mod" "sigs.k8s.io/controller-runtime@$cr" "k8s.io/client-go@$kube" \
		"k8s.io/api@$kube" "k8s.io/apimachinery@$kube" >&2 && go mod tidy -modfile="$mod" >&2)
	echo "-modfile=$mod"
}
root=$(upgrade . root)
echo "compat: $(go list "$root" -m -f '{{.Path}} {{.Version}}' sigs.k8s.io/controller-runtime k8s.io/client-go | tr '\n' ' ')" >&2
go vet "$root" ./...
for m in cloud/eks cloud/gke cloud/aks; do
	flag=$(upgrade "$m" "$(basename "$m")")
	(cd "$m" && go vet "$flag" ./...)
	if [ "$what" = test ]; then (cd "$m" && go test "$flag" -count=1 -timeout 20m ./...); fi
done
if [ "$what" = test ]; then
	go test "$root" -count=1 -timeout 20m -skip '^(TestImage|TestStaticELFSeesDynamicBinaries)$' \
		$(go list "$root" ./... | grep -Ev '/(integration|integration/restart|hack/release)$')
fi
