#!/usr/bin/env bash
# tools.sh start | wait: builds the envtest binaries and kubectl
# (hack/envtest.sh) and the peers' exec plugins (hack/peers.sh), and
# installs the browser tests' headless Chromium (hack/chromium.sh), in the
# background (hack/background.sh, stage "tools").
#
# start begins the work when any of them is missing and returns at once;
# its output goes to bin/tools.log. On a fresh machine the builds (other
# projects' programs, which share no compiled package with ours) and the
# install (apt-get: mostly download) then run beside vet and staticcheck
# rather than before the tests. wait returns when the work started by
# start has ended, prints its log, and fails if it failed; with nothing
# started it returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case ${1:-} in
start)
	if bash "$here/envtest.sh" --cached >/dev/null && bash "$here/peers.sh" --cached >/dev/null &&
		bash "$here/chromium.sh" --cached >/dev/null 2>&1; then
		bash "$here/background.sh" forget tools
		exit 0
	fi
	echo "tools: building the envtest and peer binaries and installing the headless Chromium in the background (bin/tools.log)" >&2
	bash "$here/background.sh" start tools bash -c 'bash "$1/envtest.sh" >/dev/null && bash "$1/peers.sh" >/dev/null && bash "$1/chromium.sh" >/dev/null' tools "$here"
	;;
wait)
	bash "$here/background.sh" wait tools
	;;
*)
	echo "usage: $0 start | wait" >&2
	exit 2
	;;
esac
