#!/bin/bash
# Every crate's fuzzers (their `fuzz::` unit tests, FUZZ_CASES inputs a
# target), the crates' test binaries started together: cargo runs one
# binary after another, and each one's last targets would leave a core
# idle. Arguments go to cargo's build (make fuzz: --release).
#
#   fuzz.sh [CARGO ARGS...]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(cargo test --locked --workspace --lib --no-run --message-format=json "$@") \
    || { echo "fuzz: building the unit tests failed" >&2; exit 1; }
mapfile -t bins < <(jq -r \
    'select(.reason == "compiler-artifact" and .profile.test and .executable != null) | .executable' \
    <<<"$out" | sort -u)
(( ${#bins[@]} > 0 )) || { echo "fuzz: no test binary was built" >&2; exit 1; }
pids=()
for b in "${bins[@]}"; do
    "$b" fuzz:: --quiet &
    pids+=("$!")
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
