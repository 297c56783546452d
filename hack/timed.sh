#!/usr/bin/env bash
# timed.sh NAME COMMAND...: runs COMMAND and prints how long the stage took,
# so slow stages show in CI's output; it also adds "NAME SECONDS EXIT" to
# bin/stages, which hack/stages.sh reports at the end of make test.
set -uo pipefail
name=$1
shift
start=$SECONDS
"$@"
rc=$?
echo "stage $name: $((SECONDS - start)) s (exit $rc)" >&2
bin=$(dirname "$0")/../bin
mkdir -p "$bin" && echo "$name $((SECONDS - start)) $rc" >>"$bin/stages"
exit $rc
