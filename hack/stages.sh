#!/usr/bin/env bash
# stages.sh reset | report NAME:BUDGET...: make test's table of stages.
#
# reset empties bin/stages, where hack/timed.sh adds each stage's time.
# report prints every stage of this run beside its budget (seconds on a
# warm, idle two-core machine) and a warning line for each past twice its
# budget: a test grown slow shows here before it adds up to a CI run past
# its limit. A warning, never a failure: the machine's speed must not fail
# the suite.
set -euo pipefail
file=$(dirname "$0")/../bin/stages
case ${1:-} in
reset)
	mkdir -p "$(dirname "$file")"
	: >"$file"
	date +%s >"$file.start"
	;;
report)
	shift
	[ -f "$file" ] || { echo "stages: no stage has run since make test started" >&2; exit 0; }
	budgets=" $* "
	total=0 warnings=()
	printf '%-20s %8s %8s\n' stage seconds budget
	while read -r name secs rc; do
		budget=$(sed -nE "s/.* $name:([0-9]+) .*/\\1/p" <<<"$budgets")
		printf '%-20s %8s %8s%s\n' "$name" "$secs" "${budget:--}" "$([ "$rc" = 0 ] || echo "  (exit $rc)")"
		total=$((total + secs))
		if [ -n "$budget" ] && [ "$secs" -gt $((2 * budget)) ]; then
			warnings+=("warning: stage $name took $secs s, more than twice its budget of $budget s")
		fi
	done <"$file"
	# Stages overlap (tools beside vet, the long specs beside go-test, the
	# soak beside compat): their sum is more than the run took.
	printf '%-20s %8s\n' "sum" "$total"
	if [ -f "$file.start" ]; then
		printf '%-20s %8s\n' "wall clock" "$(($(date +%s) - $(cat "$file.start")))"
	fi
	if grep -q '^tools ' "$file"; then
		echo "(this run built the envtest and peer binaries: a fresh machine, whose stages also compile every dependency once)"
	fi
	for w in ${warnings[@]+"${warnings[@]}"}; do echo "$w"; done
	;;
*)
	echo "usage: $0 reset | report NAME:BUDGET..." >&2
	exit 2
	;;
esac
