#!/bin/bash
# `make rpm`: build the binary RPM from packaging/rpm/podscope.spec with
# rpmbuild, packaging the checkout's release build in target/release (`make
# rpm` runs `make build` first; rpmbuild does not build it again); output in
# target/rpm/RPMS.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=$SRC/target/rpm
command -v rpmbuild >/dev/null || { echo "build-rpm: rpmbuild missing (make deps installs Debian's rpm)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
# --nodeps: the toolchain is rustup's, not an RPM; Debian has no rpmdb of
# build dependencies to check anyway.
rpmbuild -bb --nodeps \
    --define "_topdir $OUT" \
    --define "podscope_src $SRC" \
    "$SRC/packaging/rpm/podscope.spec" >"$OUT/build.log" 2>&1 \
    || { tail -n 40 "$OUT/build.log" >&2; echo "build-rpm: rpmbuild failed (log: $OUT/build.log)" >&2; exit 1; }
echo "build-rpm: $(ls "$OUT"/RPMS/*/podscope-*.rpm)"
