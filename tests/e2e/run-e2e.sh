#!/bin/bash
# make e2e: build the kubelet end-to-end test (tests/e2e/main.rs; with the
# integration tests' features, so their library is reused) and run it
# inside the systemd harness, podscope installed as for the integration
# tests; kubelet's and podscoped's journals are printed when it fails.
#
#   KUBELET, KUBELET_1_36   kubelet 1.26 and 1.36 (`make e2e` passes the
#                           Makefile's); CRICTL too
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
if [[ ${1:-} == inside ]]; then
    # In the harness: the test, then kubelet stopped whatever happened.
    shift
    set +e
    RUST_BACKTRACE=0 "$@"
    rc=$?
    set -e
    if [[ $rc -ne 0 ]]; then
        echo "run-e2e: the test failed ($rc); kubelet's journal:" >&2
        journalctl -u kubelet --no-pager -n 80 >&2 || true
    fi
    "$HERE/kubelet.sh" stop || rc=1
    exit "$rc"
fi
for var in KUBELET KUBELET_1_36 CRICTL; do
    [[ -n ${!var:-} && -x ${!var} ]] \
        || { echo "run-e2e: $var='${!var:-}' is not an executable file (set KUBELET=, KUBELET_1_36= and CRICTL=)" >&2; exit 1; }
done
BIN=$("$REPO/tests/harness/test-binary.sh" e2e)
exec "$REPO/tests/harness/harness.sh" run "$HERE/run-e2e.sh" inside "$BIN"
