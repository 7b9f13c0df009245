#!/bin/bash
# Build the integration tests and run them inside the systemd harness.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
out=$(cargo test --locked --features harness-tests --test integration --no-run 2>&1) \
    || { echo "$out" >&2; echo "run-integration: building the integration tests failed" >&2; exit 1; }
BIN=$(echo "$out" | sed -n 's/.*Executable tests\/integration.rs (\(.*\))/\1/p' | tail -n1)
[[ -n $BIN && -x $BIN ]] || { echo "$out" >&2; echo "run-integration: integration test binary not found" >&2; exit 1; }
exec "$HERE/harness.sh" run "$REPO/$BIN" --test-threads=1 "$@"
