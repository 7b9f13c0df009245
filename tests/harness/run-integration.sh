#!/bin/bash
# Build the integration tests and run them inside the systemd harness.
#
#   CRICTL, CRITEST   Kubernetes' CRI tools (`make integration` passes the
#                     Makefile's): the harness shows them inside and the
#                     tests read them (tests/common: cri_tool)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
for var in CRICTL CRITEST; do
    [[ -n ${!var:-} && -x ${!var} ]] \
        || { echo "run-integration: $var='${!var:-}' is not an executable file (set CRICTL= and CRITEST=)" >&2; exit 1; }
done
out=$(cargo test --locked --features harness-tests,failpoints --test integration --no-run --message-format=json) \
    || { echo "run-integration: building the integration tests failed" >&2; exit 1; }
BIN=$(jq -r 'select(.reason == "compiler-artifact" and .target.name == "integration" and .executable != null) | .executable' <<<"$out" | tail -n1)
[[ -n $BIN && -x $BIN ]] || { echo "run-integration: integration test binary not found" >&2; exit 1; }
exec "$HERE/harness.sh" run "$BIN" --test-threads=1 "$@"
