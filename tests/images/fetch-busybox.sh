#!/bin/bash
# Fetch Debian's dynamically linked busybox (package `busybox`) for the
# shell of critest's stand-in images (tests/images/build.sh), outside the
# harness (which has no network):
#
#   fetch-busybox.sh [DEST_DIR]     default /var/cache/podscope-test/busybox
#
# Why not busybox-static's: Debian builds it with FEATURE_SH_STANDALONE, so
# its ash runs its own applets without looking at PATH. critest's
# MaskedPaths spec masks /bin/ls with /dev/null and expects `/bin/sh -c ls`
# to fail with "/bin/sh: ls: Permission denied", as the ash of a
# busybox image does; a standalone ash runs the ls applet instead. The two
# packages conflict, so the binary is taken out of the .deb, not installed.
# Idempotent: does nothing when DEST_DIR/busybox is there.
set -euo pipefail
DEST=${1:-/var/cache/podscope-test/busybox}
say() { echo "fetch-busybox: $*" >&2; }

if [[ -x $DEST/busybox ]]; then
    exit 0
fi
command -v apt-get >/dev/null || { say "apt-get missing (a Debian machine is needed)"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Root downloads into a root-owned directory: apt's _apt sandbox user
# cannot write there, and would only warn.
download() { (cd "$TMP" && apt-get download -qq -o APT::Sandbox::User=root busybox); }
if ! download; then
    # The package lists may name a version the archive no longer has.
    say "apt-get download failed; updating the package lists and trying again"
    apt-get update -qq
    download || { say "FAILED: cannot download Debian's busybox package"; exit 1; }
fi
dpkg-deb -x "$TMP"/busybox_*.deb "$TMP/x"
[[ -x $TMP/x/bin/busybox ]] || { say "FAILED: the busybox package has no bin/busybox"; exit 1; }
install -D -m 0755 "$TMP/x/bin/busybox" "$DEST/busybox"
say "$("$DEST/busybox" | head -n1) in $DEST"
