#!/usr/bin/env bash
# busy.sh COMMAND...: runs COMMAND beside BUSY busy loops (default 2, one per
# core of a CI runner), so that a test whose verdict depends on the machine's
# speed fails here rather than on someone else's machine. The loops stop when
# COMMAND ends (or this script does, however it ends); the exit status is
# COMMAND's.
#
#   bash hack/busy.sh go test -race -count=1 ./fleet
#   BUSY=4 bash hack/busy.sh make gotest
set -uo pipefail

if [ $# -eq 0 ]; then
	echo "usage: [BUSY=N] $0 COMMAND..." >&2
	exit 2
fi
n=${BUSY:-2}
case $n in
'' | *[!0-9]*)
	echo "busy.sh: BUSY must be a number of loops, not \"$n\"" >&2
	exit 2
	;;
esac

pids=()
stop() {
	# Only the loops this script started, by their ids.
	if [ ${#pids[@]} -gt 0 ]; then
		kill "${pids[@]}" 2>/dev/null
		wait "${pids[@]}" 2>/dev/null
	fi
	pids=()
}
trap stop EXIT

self=$$
for ((i = 0; i < n; i++)); do
	# A loop that never sleeps: a whole core's worth of demand each. Every
	# hundred thousand turns (a fraction of a second) it checks that this
	# script still runs, so that not even a kill -9 of the script leaves it
	# spinning.
	(
		trap - EXIT
		while kill -0 "$self" 2>/dev/null; do
			for ((j = 0; j < 100000; j++)); do :; done
		done
	) &
	pids+=($!)
done
echo "busy.sh: $n busy loop(s) beside: $*" >&2

# In the foreground, so that it keeps its standard input and Ctrl-C reaches
# it as it would without this script.
"$@"
rc=$?
stop
exit $rc
