#!/usr/bin/env bash
# timed.sh NAME COMMAND...: runs COMMAND and prints how long the stage took,
# so slow stages show in CI's output.
set -uo pipefail
name=$1
shift
start=$SECONDS
"$@"
rc=$?
echo "stage $name: $((SECONDS - start)) s (exit $rc)" >&2
exit $rc
