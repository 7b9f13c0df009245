#!/bin/bash
# make load: build the full-node load test (tests/load/main.rs, with the
# integration tests' features so their library build is reused) and run it
# inside the systemd harness, podscope installed as for the other suites.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
BIN=$("$REPO/tests/harness/test-binary.sh" load)
exec "$REPO/tests/harness/harness.sh" run "$BIN"
