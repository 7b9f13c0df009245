#!/bin/bash
# `make deb`: build the binary package from packaging/debian, in a staging
# copy under target/deb so the checkout stays clean, then run lintian. It
# packages the release build in target/release (`make deb` runs `make
# build` first); dpkg-buildpackage does not build it again.
#
#   DEB_VERSION=V   package version V instead of debian/changelog's newest
#                   (a changelog entry is added to the staging copy)
#   LINTIAN=no      skip lintian
#   DEB_OUT=DIR     build in DIR instead of target/deb (emptied first)
#
# The package's .deb, .changes and .buildinfo land in target/deb/.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${DEB_OUT:-$SRC/target/deb}
[[ $OUT == /* ]] || OUT=$SRC/$OUT
STAGE=$OUT/podscope
for tool in dpkg-buildpackage dh; do
    command -v "$tool" >/dev/null || { echo "build-deb: $tool missing (make deps installs it)" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$STAGE"
cp -r "$SRC/packaging/debian" "$STAGE/debian"
if [[ -n ${DEB_VERSION:-} ]]; then
    entry=$(printf 'podscope (%s) unstable; urgency=medium\n\n  * Build %s.\n\n -- podscope maintainers <maintainers@podscope.dev>  %s\n\n' \
        "$DEB_VERSION" "$DEB_VERSION" "$(date -R)")
    printf '%s\n%s\n' "$entry" "$(cat "$STAGE/debian/changelog")" > "$STAGE/debian/changelog"
fi
# -d: the Rust toolchain is rustup's (Debian 12's rustc is older than the
# 1.85 the crates need), so Build-Depends cannot be checked by dpkg.
(cd "$STAGE" && SRC="$SRC" PODSCOPE_PREBUILT=yes dpkg-buildpackage -b -uc -us -d) >"$OUT/build.log" 2>&1 \
    || { tail -n 40 "$OUT/build.log" >&2; echo "build-deb: dpkg-buildpackage failed (log: $OUT/build.log)" >&2; exit 1; }
deb=$(ls "$OUT"/podscope_*.deb)
echo "build-deb: $deb"
if [[ ${LINTIAN:-yes} != no ]]; then
    command -v lintian >/dev/null || { echo "build-deb: lintian missing (make deps installs it)" >&2; exit 1; }
    # Errors fail the build; warnings and below are printed (docs/PACKAGING.md
    # lists the ones expected, with the reason for each).
    lintian --fail-on error --display-level '>=info' "$deb" | tee "$OUT/lintian.txt"
    echo "build-deb: lintian: $(grep -c '^E:' "$OUT/lintian.txt" || true) errors, $(grep -c '^W:' "$OUT/lintian.txt" || true) warnings"
fi
