#!/usr/bin/env bash
# background.sh start NAME COMMAND... | wait NAME | forget NAME: runs a
# stage of make test in the background, beside the stages that follow, and
# waits for it where its result is needed.
#
# start runs COMMAND as a stage (hack/timed.sh NAME) and returns at once;
# its output goes to bin/NAME.log, its exit code to bin/NAME.rc. wait
# returns when that run has ended, prints its log, and fails if it failed;
# with nothing started under NAME, or a run stopped or killed before it
# ended, it returns at once. forget drops what a finished run left (its
# pid and exit code), for a caller that found nothing to start.
#
# A run an earlier make test started (one that failed in go-test, say) and
# still going is left to finish rather than doubled: two go commands
# building the same packages at once would each compile them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../bin
mkdir -p "$bin"
usage() { echo "usage: $0 start NAME COMMAND... | wait NAME | forget NAME" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 name=$2
shift 2
pidfile=$bin/$name.pid rcfile=$bin/$name.rc log=$bin/$name.log
# running PID: whether PID is still a run this script started under NAME,
# and not stopped (Ctrl-Z stops make's whole job, this run with it: one
# waited for, or adopted, would never end). -ww: a COLUMNS in the
# environment must not cut the line short.
running() {
	local line
	line=$(ps -ww -o stat=,args= -p "$1" 2>/dev/null) || return 1
	case $line in T* | t*) return 1 ;; esac
	grep -qF "background.sh start $name " <<<"$line"
}
case $cmd in
start)
	[ $# -ge 1 ] || usage
	if [ -f "$pidfile" ] && [ ! -f "$rcfile" ] && running "$(cat "$pidfile")"; then
		echo "$name: still running from an earlier make test (bin/$name.log)" >&2
		exit 0
	fi
	rm -f "$pidfile" "$rcfile"
	# Every descriptor of the background run goes to the log: one left on
	# make's output would keep a reader of it (CI) waiting for the run.
	: >"$log"
	(
		# set -e would end this subshell at a failed run, before the rc file.
		rc=0
		bash "$here/timed.sh" "$name" "$@" || rc=$?
		# Killed by a signal (Ctrl-C reaches the command, not this
		# subshell): no result, as if it had not finished, so that what
		# needs it does the work itself rather than fail on a stop.
		[ "$rc" -le 128 ] || exit 0
		# Written whole, then renamed: wait must never read it half-written.
		echo $rc >"$rcfile.tmp" && mv "$rcfile.tmp" "$rcfile"
	) </dev/null >>"$log" 2>&1 &
	echo $! >"$pidfile"
	;;
wait)
	[ -f "$pidfile" ] || exit 0
	pid=$(cat "$pidfile")
	# The pid file may outlive its run (a make test stopped by Ctrl-C):
	# wait only while that pid is still this script's run.
	waited=0
	while [ ! -f "$rcfile" ] && running "$pid"; do
		[ $((waited % 60)) = 0 ] && echo "$name: waiting for it to end (pid $pid, bin/$name.log)" >&2
		sleep 2
		waited=$((waited + 2))
	done
	rm -f "$pidfile"
	if [ ! -f "$rcfile" ]; then
		echo "$name: the background run did not finish (stopped or killed); what needs it does the work itself" >&2
		exit 0
	fi
	cat "$log" >&2
	rc=$(cat "$rcfile")
	if [ "$rc" != 0 ]; then
		echo "$name: failed in the background (exit $rc; bin/$name.log above)" >&2
		exit 1
	fi
	;;
forget)
	if ! { [ -f "$pidfile" ] && [ ! -f "$rcfile" ] && running "$(cat "$pidfile")"; }; then
		rm -f "$pidfile" "$rcfile"
	fi
	;;
*) usage ;;
esac
