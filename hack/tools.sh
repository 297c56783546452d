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
# running PID: whether PID is still a build this script started.
running() { ps -o args= -p "$1" 2>/dev/null | grep -q 'tools\.sh start'; }
case ${1:-} in
start)
	# A build an earlier make test started (one that failed at vet, say)
	# may still run: let it go on rather than start a second beside it.
	if [ -f "$bin/tools.pid" ] && [ ! -f "$bin/tools.rc" ] && running "$(cat "$bin/tools.pid")"; then
		echo "tools: the envtest and peer binaries are still building from an earlier run (bin/tools.log)" >&2
		exit 0
	fi
	rm -f "$bin/tools.pid" "$bin/tools.rc"
	if bash "$here/envtest.sh" --cached >/dev/null && bash "$here/peers.sh" --cached >/dev/null; then
		exit 0
	fi
	echo "tools: building the envtest and peer binaries in the background (bin/tools.log)" >&2
	# Every descriptor of the background job goes to the log: one left on
	# make's output would keep a reader of it (CI) waiting for the job.
	: >"$bin/tools.log"
	(
		# set -e would end this subshell at a failed build, before tools.rc.
		rc=0
		bash "$here/timed.sh" tools bash -c 'bash "$1/envtest.sh" >/dev/null && bash "$1/peers.sh" >/dev/null' tools "$here" || rc=$?
		# Written whole, then renamed: wait must never read it half-written.
		echo $rc >"$bin/tools.rc.tmp" && mv "$bin/tools.rc.tmp" "$bin/tools.rc"
	) </dev/null >>"$bin/tools.log" 2>&1 &
	echo $! >"$bin/tools.pid"
	;;
wait)
	[ -f "$bin/tools.pid" ] || exit 0
	pid=$(cat "$bin/tools.pid")
	# The pid file may outlive its build (a make test stopped by Ctrl-C):
	# wait only while that pid is still this script's build.
	while [ ! -f "$bin/tools.rc" ] && running "$pid"; do sleep 2; done
	rm -f "$bin/tools.pid"
	if [ ! -f "$bin/tools.rc" ]; then
		# Stopped before it ended (Ctrl-C): not a failure of this run; the
		# caller's envtest.sh and peers.sh build what is missing.
		echo "tools: an earlier background build did not finish; building in the foreground" >&2
		exit 0
	fi
	cat "$bin/tools.log" >&2
	rc=$(cat "$bin/tools.rc")
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
