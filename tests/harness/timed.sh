#!/bin/bash
# timed.sh SUITE CMD [ARGS...]: run CMD and say how long the suite took, so
# that `make check` shows each suite's time and its growth is seen.
suite=$1
shift
start=$(date +%s.%N)
"$@"
rc=$?
awk -v s="$start" -v e="$(date +%s.%N)" -v n="$suite" -v rc="$rc" \
    'BEGIN { printf "suite %-12s %7.1f s%s\n", n, e - s, rc ? " (FAILED, exit " rc ")" : "" }' >&2
exit $rc
