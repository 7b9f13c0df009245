#!/bin/bash
# Build podscope's test images as OCI image layouts, by hand, from Debian's
# busybox-static: deterministic tar layers (sorted, mtime 0, root-owned
# unless said otherwise), gzip or zstd, configs and manifests written here.
# No network, no Docker.
#
#   build.sh OUT_DIR
#
# OUT_DIR/<name>/ is an OCI layout per repository (tags in its index.json);
# OUT_DIR/images.list has one line per tag to push: "<layout> <tag> <repository>".
# push.sh copies them into the harness registry with skopeo.
#
# The images critest's image specs pull (cri-tools v1.29.0,
# pkg/validate/consts.go) are here under their own names, served through
# registries.conf mirrors (tests/harness/registries.conf); podscope's own
# test images are under podscope-test/.
set -euo pipefail
OUT=${1:?usage: build.sh OUT_DIR}
BUSYBOX=${BUSYBOX:-/bin/busybox}
[[ -x $BUSYBOX ]] || { echo "build.sh: $BUSYBOX missing (apt-get install busybox-static)" >&2; exit 1; }
command -v jq >/dev/null || { echo "build.sh: jq missing" >&2; exit 1; }
command -v zstd >/dev/null || { echo "build.sh: zstd missing" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
: > "$OUT/images.list"

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# blob LAYOUT FILE -> "sha256:<hex> <size>" (the file moves into the layout)
blob() {
    local layout=$1 f=$2 h
    h=$(sha "$f")
    mkdir -p "$layout/blobs/sha256"
    local s
    s=$(size "$f")
    mv "$f" "$layout/blobs/sha256/$h"
    echo "sha256:$h $s"
}

# tar_dir DIR OUT.tar: a reproducible tar of DIR's contents.
tar_dir() {
    tar --sort=name --mtime=@0 --numeric-owner --format=pax \
        --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
        -C "$1" -cf "$2" .
}

# The busybox root: the static binary and a few applet links.
busybox_root() {
    local d=$1
    mkdir -p "$d/bin" "$d/etc" "$d/tmp"
    cp "$BUSYBOX" "$d/bin/busybox"
    for a in sh ls cat echo sleep true false env id top ps mkdir rm touch wc head hostname nslookup wget; do
        ln -s busybox "$d/bin/$a"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nwww-data:x:33:33:www-data:/var/www:/bin/sh\n' > "$d/etc/passwd"
    printf 'root:x:0:\nwww-data:x:33:\n' > "$d/etc/group"
    chmod 1777 "$d/tmp"
}

# layer SRC_DIR LAYOUT COMPRESSION(gzip|zstd|none) -> "<media> <digest> <size> <diffid>"
layer() {
    local src=$1 layout=$2 comp=$3 t="$STAGE/layer.tar" diff media d s
    tar_dir "$src" "$t"
    diff="sha256:$(sha "$t")"
    case $comp in
        gzip) gzip -n -6 -c "$t" > "$t.c"; media=application/vnd.oci.image.layer.v1.tar+gzip;;
        zstd) zstd -q -3 -c "$t" > "$t.c"; media=application/vnd.oci.image.layer.v1.tar+zstd;;
        none) cp "$t" "$t.c"; media=application/vnd.oci.image.layer.v1.tar;;
    esac
    read -r d s < <(blob "$layout" "$t.c")
    rm -f "$t"
    echo "$media $d $s $diff"
}

# image LAYOUT ARCH USER LABEL LAYER... (each "media digest size diffid")
#   -> "<manifest digest> <manifest size>"
image() {
    local layout=$1 arch=$2 user=$3 label=$4
    shift 4
    local layers="[]" diffs="[]" l media d s diff
    for l in "$@"; do
        read -r media d s diff <<<"$l"
        layers=$(jq -c --arg m "$media" --arg d "$d" --argjson s "$s" '. + [{mediaType:$m,digest:$d,size:$s}]' <<<"$layers")
        diffs=$(jq -c --arg d "$diff" '. + [$d]' <<<"$diffs")
    done
    jq -cn --arg arch "$arch" --arg user "$user" --arg lbl "$label" --argjson diffs "$diffs" '{
        created: "1970-01-01T00:00:00Z", architecture: $arch, os: "linux",
        config: {User: $user, Env: ["PATH=/bin"], Cmd: ["/bin/sh"],
                 Labels: {"org.podscope.test": $lbl}},
        rootfs: {type: "layers", diff_ids: $diffs},
        history: [{created: "1970-01-01T00:00:00Z", created_by: "tests/images/build.sh"}]}' \
        > "$STAGE/config.json"
    local cd cs
    read -r cd cs < <(blob "$layout" "$STAGE/config.json")
    jq -cn --arg cd "$cd" --argjson cs "$cs" --argjson layers "$layers" '{
        schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
        layers: $layers}' > "$STAGE/manifest.json"
    blob "$layout" "$STAGE/manifest.json"
}

# tag LAYOUT TAG DIGEST SIZE MEDIA REPOSITORY...: name a manifest (or index)
# in the layout and list it for push.sh under each repository.
tag() {
    local layout=$1 tg=$2 d=$3 s=$4 media=$5
    shift 5
    [[ -f $layout/oci-layout ]] || echo '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
    [[ -f $layout/index.json ]] || echo '{"schemaVersion":2,"manifests":[]}' > "$layout/index.json"
    jq -c --arg t "$tg" --arg d "$d" --argjson s "$s" --arg m "$media" \
        '.manifests += [{mediaType:$m,digest:$d,size:$s,annotations:{"org.opencontainers.image.ref.name":$t}}]' \
        "$layout/index.json" > "$STAGE/index.json"
    mv "$STAGE/index.json" "$layout/index.json"
    local repo
    for repo in "$@"; do
        echo "$layout $tg $repo" >> "$OUT/images.list"
    done
}

OCI_MANIFEST=application/vnd.oci.image.manifest.v1+json
OCI_INDEX=application/vnd.oci.image.index.v1+json

# A single-layer busybox image in LAYOUT: simple LAYOUT USER LABEL [COMP]
simple() {
    local layout=$1 user=$2 label=$3 comp=${4:-gzip}
    rm -rf "$STAGE/root"
    mkdir -p "$STAGE/root"
    busybox_root "$STAGE/root"
    # The label makes each image's content, and so its id, its own.
    echo "$label" > "$STAGE/root/etc/podscope-test-image"
    local l
    l=$(layer "$STAGE/root" "$layout" "$comp")
    image "$layout" amd64 "$user" "$label" "$l"
}

CRITEST=gcr.io/k8s-staging-cri-tools
E2E=registry.k8s.io/e2e-test-images

# --- critest's Image Manager images ---
L=$OUT/critest-basic
read -r d s < <(simple "$L" "" basic)
tag "$L" latest "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-latest"
tag "$L" test "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-tag"
tag "$L" all "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-tag"
for n in 1 2 3; do
    tag "$L" "$n" "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-tags"
done
for n in 1 2 3; do
    L=$OUT/critest-$n
    read -r d s < <(simple "$L" "" "image-$n")
    tag "$L" latest "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-$n"
done
for pair in "uid:1002" "username:www-data" "uid-group:1003:1004" "username-group:www-data:1004"; do
    name=${pair%%:*}
    user=${pair#*:}
    L=$OUT/critest-user-$name
    read -r d s < <(simple "$L" "$user" "user-$name")
    tag "$L" latest "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-user-$name"
done
L=$OUT/critest-group
read -r d s < <(simple "$L" 1000 predefined-group)
tag "$L" latest "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-predefined-group"

# --- the busybox images critest's container specs run ---
L=$OUT/e2e-busybox
read -r d s < <(simple "$L" "" e2e-busybox)
tag "$L" 1.29-2 "$d" "$s" $OCI_MANIFEST "$E2E/busybox"
tag "$L" latest "$d" "$s" $OCI_MANIFEST "docker.io/library/busybox"

# --- podscope's own ---
# Three layers: a base, then a whiteout (etc/remove-me) and an opaque
# directory (opaque/, whose lower files must disappear), then a setuid file,
# a hardlink and a file owned by 1000:1000.
L=$OUT/multilayer
rm -rf "$STAGE/l1" "$STAGE/l2" "$STAGE/l3"
mkdir -p "$STAGE/l1" "$STAGE/l2/etc" "$STAGE/l2/opaque" "$STAGE/l3/bin" "$STAGE/l3/home/user"
busybox_root "$STAGE/l1"
echo gone > "$STAGE/l1/etc/remove-me"
mkdir -p "$STAGE/l1/opaque" && echo lower > "$STAGE/l1/opaque/from-lower"
: > "$STAGE/l2/etc/.wh.remove-me"
: > "$STAGE/l2/opaque/.wh..wh..opq"
echo upper > "$STAGE/l2/opaque/from-upper"
printf '#!/bin/sh\n' > "$STAGE/l3/bin/setuid-tool"
chmod 4755 "$STAGE/l3/bin/setuid-tool"
ln "$STAGE/l3/bin/setuid-tool" "$STAGE/l3/bin/setuid-link"
echo mine > "$STAGE/l3/home/user/file"
chown -R 1000:1000 "$STAGE/l3/home/user"
l1=$(layer "$STAGE/l1" "$L" gzip)
l2=$(layer "$STAGE/l2" "$L" gzip)
l3=$(layer "$STAGE/l3" "$L" none)
read -r d s < <(image "$L" amd64 "" multilayer "$l1" "$l2" "$l3")
tag "$L" latest "$d" "$s" $OCI_MANIFEST podscope-test/multilayer

# zstd-compressed layer.
L=$OUT/zstd
read -r d s < <(simple "$L" "" zstd zstd)
tag "$L" latest "$d" "$s" $OCI_MANIFEST podscope-test/zstd

# An index with an arm64 entry (listed first, which must not be chosen)
# and the amd64 one.
L=$OUT/multiarch
read -r darm sarm < <(simple "$L" "" multiarch-arm64)
# Rewrite the arm64 config's architecture: simple() wrote amd64.
read -r damd samd < <(simple "$L" "" multiarch-amd64)
arm_manifest=$L/blobs/sha256/${darm#sha256:}
arm_cfg=$(jq -r .config.digest "$arm_manifest")
jq -c '.architecture = "arm64" | .variant = "v8"' "$L/blobs/sha256/${arm_cfg#sha256:}" > "$STAGE/cfg.json"
read -r ncd ncs < <(blob "$L" "$STAGE/cfg.json")
jq -c --arg d "$ncd" --argjson s "$ncs" '.config.digest = $d | .config.size = $s' "$arm_manifest" > "$STAGE/m.json"
read -r darm sarm < <(blob "$L" "$STAGE/m.json")
jq -cn --arg a "$darm" --argjson asz "$sarm" --arg b "$damd" --argjson bsz "$samd" '{
    schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [
      {mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $a, size: $asz,
       platform: {architecture: "arm64", os: "linux", variant: "v8"}},
      {mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $b, size: $bsz,
       platform: {architecture: "amd64", os: "linux"}}]}' > "$STAGE/index-blob.json"
read -r di si < <(blob "$L" "$STAGE/index-blob.json")
tag "$L" latest "$di" "$si" $OCI_INDEX podscope-test/multiarch

# Two images for a tag that moves: push.sh pushes "first" as moving:latest;
# the test pushes "second" over it.
for v in first second; do
    L=$OUT/moving-$v
    read -r d s < <(simple "$L" "" "moving-$v")
    tag "$L" latest "$d" "$s" $OCI_MANIFEST "podscope-test/moving-$v"
done

# The image behind the registry with htpasswd authentication (push.sh
# sends it to the second registry).
L=$OUT/private
read -r d s < <(simple "$L" "" private)
tag "$L" latest "$d" "$s" $OCI_MANIFEST "auth:podscope-test/private"

echo "build.sh: $(wc -l < "$OUT/images.list") tags in $OUT" >&2
