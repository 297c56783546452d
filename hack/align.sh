#!/usr/bin/env bash
# align.sh: gives every module of the workspace (hack/all.work) the root
# module's version of each dependency they both build, and the workspace's
# version of any other dependency a module builds, by editing the other
# modules' go.mod (go mod edit, then go mod tidy). A package is compiled
# once for all modules only when everything under it is the same version in
# each, so that make test builds client-go, apimachinery and
# controller-runtime once rather than once a module.
#
# The root module's go.mod is never changed here: it asks for the oldest
# versions the library supports, and raising one raises every user's. When
# a dependency of another module needs a newer version than the root's,
# TestModulesBuildOneVersionOfEachDependency (internal/modules) keeps
# failing and names it: raise it in the root by hand, knowingly, and run
# this again.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$PWD/hack/all.work

# built DIR [GOWORK]: "path version" of each module that provides a package
# to DIR's packages or their tests, the main modules left out.
built() {
	(cd "$1" && GOWORK=${2:-off} go list -deps -test \
		-f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' ./... | sort -u)
}

# pin DIR FILE: requires in DIR's go.mod each "path version" of FILE that
# DIR builds at another version, then tidies it.
pin() {
	local dir=$1 want=$2 args=() path version have
	while read -r path have; do
		version=$(awk -v p="$path" '$1 == p { print $2 }' "$want")
		if [ -n "$version" ] && [ "$version" != "$have" ]; then
			args+=("-require=$path@$version")
		fi
	done < <(built "$dir")
	if [ ${#args[@]} -gt 0 ]; then
		echo "align: $dir: ${args[*]}" >&2
		(cd "$dir" && go mod edit "${args[@]}" && GOWORK=off go mod tidy)
		edits=$((edits + 1))
	fi
}

mapfile -t others < <(GOWORK=$work go list -m -f '{{.Dir}}' | grep -vxF "$PWD")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# go mod tidy may move a version again (a pin lowers one that another
# requirement raises back): repeat until a round edits nothing.
for round in 1 2 3 4; do
	edits=0
	built . >"$tmp/root"
	for dir in "${others[@]}"; do pin "$dir" "$tmp/root"; done

	# The workspace loads each module's requirements fully, a module alone
	# prunes its dependencies' (go.mod's graph pruning): a module can build
	# an older version alone than in the workspace.
	(GOWORK=$work go list -deps -test \
		-f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' \
		$(GOWORK=$work go list -m -f '{{.Dir}}/...') | sort -u) >"$tmp/work"
	for dir in "${others[@]}"; do pin "$dir" "$tmp/work"; done
	[ "$edits" = 0 ] && break
done

# What tidy would not let align (a dependency needing a newer version than
# the root's) fails here, named, rather than at the next make test.
go test -count=1 -run '^TestModulesBuildOneVersionOfEachDependency$' ./internal/modules
