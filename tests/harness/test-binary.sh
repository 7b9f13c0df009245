#!/bin/bash
# Build one of the harness's test targets (Cargo.toml's [[test]] NAME) with
# the features they all share, so the library is built once for all, and
# print its executable's path.
#
#   test-binary.sh NAME
set -euo pipefail
name=${1:?usage: test-binary.sh NAME}
cd "$(dirname "$0")/../.."
out=$(cargo test --locked --features harness-tests,failpoints --test "$name" --no-run --message-format=json) \
    || { echo "test-binary: building the $name tests failed" >&2; exit 1; }
bin=$(jq -r --arg n "$name" \
    'select(.reason == "compiler-artifact" and .target.name == $n and .executable != null) | .executable' \
    <<<"$out" | tail -n1)
[[ -n $bin && -x $bin ]] || { echo "test-binary: the $name test binary not found" >&2; exit 1; }
echo "$bin"
