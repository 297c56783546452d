#!/usr/bin/env bash
# tools.sh start | wait: builds the envtest binaries (hack/envtest.sh) and
# the peers' exec plugins (hack/peers.sh) in the background.
#
# start begins the build when either is missing and returns at once; its
# output goes to bin/tools.log. On a fresh machine the builds (other
# projects' programs, which share no compiled package with ours) then run
# beside vet and staticcheck rather than before the tests. wait returns
# when the build started by start has ended, prints its log, and fails if
# it failed; with nothing started it returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../bin
mkdir -p "$bin"
case ${1:-} in
start)
	rm -f "$bin/tools.pid" "$bin/tools.rc"
	if bash "$here/envtest.sh" --cached >/dev/null && bash "$here/peers.sh" --cached >/dev/null; then
		exit 0
	fi
	echo "tools: building the envtest and peer binaries in the background (bin/tools.log)" >&2
	# Every descriptor of the background job goes to the log: one left on
	# make's output would keep a reader of it (CI) waiting for the job.
	: >"$bin/tools.log"
	(
		bash "$here/timed.sh" tools bash -c "bash '$here/envtest.sh' >/dev/null && bash '$here/peers.sh' >/dev/null"
		echo $? >"$bin/tools.rc"
	) </dev/null >>"$bin/tools.log" 2>&1 &
	echo $! >"$bin/tools.pid"
	;;
wait)
	[ -f "$bin/tools.pid" ] || exit 0
	pid=$(cat "$bin/tools.pid")
	# The pid file may outlive its build (a make test stopped by Ctrl-C):
	# wait only while that pid is still this script's build.
	while [ ! -f "$bin/tools.rc" ] && ps -o args= -p "$pid" 2>/dev/null | grep -q 'tools\.sh start'; do sleep 2; done
	rm -f "$bin/tools.pid"
	cat "$bin/tools.log" >&2
	rc=$(cat "$bin/tools.rc" 2>/dev/null || echo 1)
	if [ "$rc" != 0 ]; then
		echo "tools: building the envtest and peer binaries failed (exit $rc)" >&2
		exit 1
	fi
	;;
*)
	echo "usage: $0 start | wait" >&2
	exit 2
	;;
esac
