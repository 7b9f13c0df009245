#!/bin/bash
# timed.sh SUITE CMD [ARGS...]: run CMD and say how long the suite took, so
# that `make check` shows each suite's time and its growth is seen. With
# TIMED_SUMMARY=FILE the line is also appended to FILE (`make check` prints
# them all again at the end).
suite=$1
shift
start=$(date +%s.%N)
"$@"
rc=$?
line=$(awk -v s="$start" -v e="$(date +%s.%N)" -v n="$suite" -v rc="$rc" \
    'BEGIN { printf "suite %-12s %7.1f s%s\n", n, e - s, rc ? " (FAILED, exit " rc ")" : "" }')
echo "$line" >&2
[[ -z ${TIMED_SUMMARY:-} ]] || echo "$line" >> "$TIMED_SUMMARY"
exit $rc
