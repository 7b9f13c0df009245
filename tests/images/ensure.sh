#!/bin/bash
# The test images (build.sh), built into OUT_DIR unless they are there and
# made of the same inputs: shared by the harness's registry
# (tests/harness/registry/start.sh) and the node's (tests/node/registry.sh).
#
#   ensure.sh OUT_DIR
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
IMAGES=${1:?usage: ensure.sh OUT_DIR}
# Rebuilt when anything they are made of changes: the build's files, and
# the busyboxes (busybox-static, and the dynamically linked one critest's
# stand-ins use where tests/images/fetch-busybox.sh put it, with the
# libraries it loads).
BUSYBOX_SH=${BUSYBOX_SH:-/var/cache/podscope-test/busybox/busybox}
inputs() {
    sha256sum "$REPO"/tests/images/* /bin/busybox
    if [[ -x $BUSYBOX_SH ]]; then
        sha256sum "$BUSYBOX_SH" $(ldd "$BUSYBOX_SH" | awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }')
    else
        echo "no $BUSYBOX_SH"
    fi
}
stamp=$(inputs | sha256sum | cut -c1-16)
if [[ ! -f $IMAGES/images.list || $(cat "$IMAGES/.stamp" 2>/dev/null) != "$stamp" ]]; then
    echo "images: building test images into $IMAGES" >&2
    BUSYBOX_SH=$BUSYBOX_SH "$REPO/tests/images/build.sh" "$IMAGES"
    echo "$stamp" > "$IMAGES/.stamp"
fi
