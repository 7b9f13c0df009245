#!/bin/bash
# The node image's base: a Debian 12 root made with mmdebstrap from
# Debian's own packages (tests/node/packages), as a tarball in a cache
# outside the repository, and its path printed. Built once, again when the
# package list or this script changes; an old one is removed then.
#
#   image.sh CACHE_DIR
#
# The mirrors are the machine's own (its apt sources), so the image has
# what this machine's apt would install.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${1:?usage: image.sh CACHE_DIR}
say() { echo "node-image: $*" >&2; }

packages=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/packages" | tr -s ' \n' ',' | sed 's/,$//')
key=$(cat "$HERE/packages" "$0" | sha256sum | cut -c1-16)
out=$CACHE/base-$key.tar
if [[ -s $out ]]; then
    echo "$out"
    exit 0
fi
command -v mmdebstrap >/dev/null || { say "mmdebstrap not found (make deps installs it)"; exit 1; }
mkdir -p "$CACHE"
sources=()
for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
    [[ -s $f ]] && sources+=("$f")
done
((${#sources[@]})) || { say "no apt sources on this machine to build the image from"; exit 1; }
say "building $out from Debian's packages (once; cached)"
tmp=$out.partial
rm -f "$tmp"
# minbase, plus the list; no recommends beyond it, as a lean node has.
# The hooks make it bootable from /dev/vda and name the node.
mmdebstrap --quiet --format=tar --variant=minbase --include="$packages" \
    --customize-hook='echo podscope-node > "$1/etc/hostname"' \
    --customize-hook='printf "127.0.1.1 podscope-node\n" >> "$1/etc/hosts"' \
    --customize-hook='echo "/dev/vda / ext4 rw,relatime 0 1" > "$1/etc/fstab"' \
    bookworm "$tmp" "${sources[@]}" >&2 \
    || { rm -f "$tmp"; say "mmdebstrap failed"; exit 1; }
find "$CACHE" -maxdepth 1 -name 'base-*.tar' ! -name "base-$key.tar" -delete
mv "$tmp" "$out"
echo "$out"
