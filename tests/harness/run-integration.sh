#!/bin/bash
# Build the integration tests and run them inside the systemd harness.
#
#   CRICTL, CRITEST   Kubernetes' CRI tools (`make integration` passes the
#                     Makefile's): the harness shows them inside and the
#                     tests read them (podscope-test-support's harness: cri_tool)
#   CRUN_1_27         crun 1.27.1 (`make integration` unpacks it into
#                     target/tools/crun-1.27): the harness configures it as
#                     the runtime handler crun-userns beside the defaults
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
for var in CRICTL CRITEST CRUN_1_27; do
    [[ -n ${!var:-} && -x ${!var} ]] \
        || { echo "run-integration: $var='${!var:-}' is not an executable file (set CRICTL=, CRITEST= and CRUN_1_27=)" >&2; exit 1; }
done
BIN=$("$HERE/test-binary.sh" integration)
exec "$HERE/harness.sh" run "$BIN" --test-threads=1 "$@"
