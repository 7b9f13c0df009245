#!/bin/bash
# Build one of the suites (tests/Cargo.toml's [[test]] NAME) and print its
# executable's path. The binaries the suites run beside the installed ones
# are built first, into target/debug where harness::built finds them:
# podscoped with its failpoints (the kill-at-every-step tests),
# podscope-bench (its callers double as the hostile users of the abuse
# tests) and the device drivers of tests/devices (make e2e runs
# podscope-device-plugin beside kubelet 1.36, make cluster
# podscope-dra-driver on one of its nodes). One invocation each, so that
# neither rebuilds the other.
#
#   test-binary.sh NAME
set -euo pipefail
name=${1:?usage: test-binary.sh NAME}
cd "$(dirname "$0")/../.."
cargo build --locked -p podscoped -p podscope-bench -p podscope-test-devices \
    --features podscoped/failpoints --bins \
    || { echo "test-binary: building podscoped (failpoints), podscope-bench and the test devices failed" >&2; exit 1; }
out=$(cargo test --locked -p podscope-tests --features harness-tests --test "$name" --no-run --message-format=json) \
    || { echo "test-binary: building the $name tests failed" >&2; exit 1; }
bin=$(jq -r --arg n "$name" \
    'select(.reason == "compiler-artifact" and .target.name == $n and .executable != null) | .executable' \
    <<<"$out" | tail -n1)
[[ -n $bin && -x $bin ]] || { echo "test-binary: the $name test binary not found" >&2; exit 1; }
echo "$bin"
