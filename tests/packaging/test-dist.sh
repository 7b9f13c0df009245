#!/bin/bash
# `make dist`'s tarball is what the RPM spec's Source0 names and what a
# distro build unpacks: every committed file under podscope-VERSION/, and
# rpmbuild's %prep (%autosetup) and -bs (the source RPM) take it as it is.
#
#   test-dist.sh TARBALL VERSION
set -euo pipefail
TARBALL=$1 VERSION=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PASSED=0
ok() { PASSED=$((PASSED + 1)); printf 'ok %d - %s\n' "$PASSED" "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }

[[ -f $TARBALL ]] || fail "$TARBALL missing"
ok "make dist wrote $(basename "$TARBALL")"
want=$(cd "$SRC" && git ls-tree -r --name-only HEAD | sed "s|^|podscope-$VERSION/|" | sort)
have=$(tar -tzf "$TARBALL" | grep -v '/$' | sort)
if [[ $want != "$have" ]]; then
    diff <(echo "$want") <(echo "$have") | head -20 >&2 || true
    fail "the tarball is not the committed tree under podscope-$VERSION/"
fi
ok "the tarball holds the $(wc -l <<<"$have") committed files under podscope-$VERSION/"

top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
mkdir -p "$top/SOURCES"
cp "$TARBALL" "$top/SOURCES/"
# Without podscope_src the spec is a distro's: %prep unpacks Source0.
rpmbuild -bp --nodeps --define "_topdir $top" "$SRC/packaging/rpm/podscope.spec" >"$top/prep.log" 2>&1 \
    || { tail -n 20 "$top/prep.log" >&2; fail "rpmbuild -bp on Source0"; }
[[ -f $top/BUILD/podscope-$VERSION/Cargo.lock && -f $top/BUILD/podscope-$VERSION/Makefile ]] \
    || fail "%autosetup did not unpack podscope-$VERSION/"
ok "rpmbuild's %prep unpacks Source0 into podscope-$VERSION/"
rpmbuild -bs --nodeps --define "_topdir $top" "$SRC/packaging/rpm/podscope.spec" >"$top/srpm.log" 2>&1 \
    || { tail -n 20 "$top/srpm.log" >&2; fail "rpmbuild -bs"; }
srpm=$(ls "$top"/SRPMS/podscope-"$VERSION"-*.src.rpm)
rpm -qlp "$srpm" 2>/dev/null | grep -qx "podscope-$VERSION.tar.gz" || fail "the source RPM lacks Source0"
ok "rpmbuild -bs makes $(basename "$srpm") with Source0 in it"
printf '\ndist tests: %d passed\n' "$PASSED"
