#!/bin/bash
# Build podscope's test images as OCI image layouts, by hand, from Debian's
# busybox: deterministic tar layers (sorted, mtime 0, root-owned unless
# said otherwise), gzip or zstd, configs and manifests written here. No
# network, no Docker.
#
#   build.sh OUT_DIR
#
# OUT_DIR/<name>/ is an OCI layout per repository (tags in its index.json);
# OUT_DIR/images.list has one line per tag to push: "<layout> <tag> <repository>".
# tests/harness/registry/start.sh pushes them into the harness registry
# with skopeo.
#
# The images critest v1.29.0 runs or pulls (pkg/validate/consts.go,
# multi_container_linux.go, security_context_linux.go, pkg/framework) are
# here under their own names, served through registry mirrors
# (tests/harness/registry/registries.conf), as working stand-ins: each
# behaves as critest's specs expect of the real one (see "critest's images"
# below). The sandbox image of containerd (the bench's anchor) is one of
# them. podscope's own test images are under podscope-test/.
#
#   BUSYBOX      busybox-static, for podscope's own images (default /bin/busybox)
#   BUSYBOX_SH   Debian's dynamically linked busybox, for critest's images
#                (default /var/cache/podscope-test/busybox/busybox, which
#                tests/images/fetch-busybox.sh puts there); without it
#                they get busybox-static, whose ash fails one spec
#   CC           a C compiler with a static libc (default gcc)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: build.sh OUT_DIR}
BUSYBOX=${BUSYBOX:-/bin/busybox}
BUSYBOX_SH=${BUSYBOX_SH:-/var/cache/podscope-test/busybox/busybox}
CC=${CC:-gcc}
say() { echo "build.sh: $*" >&2; }
[[ -x $BUSYBOX ]] || { say "$BUSYBOX missing (apt-get install busybox-static)"; exit 1; }
command -v jq >/dev/null || { say "jq missing"; exit 1; }
command -v zstd >/dev/null || { say "zstd missing"; exit 1; }
command -v "$CC" >/dev/null || { say "$CC missing (apt-get install gcc libc6-dev)"; exit 1; }
if [[ ! -x $BUSYBOX_SH ]]; then
    say "WARNING: $BUSYBOX_SH missing (tests/images/fetch-busybox.sh fetches it):"
    say "critest's images get busybox-static, whose ash runs applets without"
    say "PATH, so critest's 'runtime should support MaskedPaths' spec fails"
    BUSYBOX_SH=$BUSYBOX
fi

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

# The busybox root of podscope's own images: the static binary and a few
# applet links.
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

# image_config LAYOUT ARCH CONFIG LAYER... (CONFIG: the config's "config"
# object, JSON; each LAYER "media digest size diffid")
#   -> "<manifest digest> <manifest size>"
image_config() {
    local layout=$1 arch=$2 cfg=$3
    shift 3
    # The layers as positional jq arguments, four fields each.
    local fields=() l
    for l in "$@"; do
        read -ra f <<<"$l"
        fields+=("${f[@]}")
    done
    jq -cn --arg arch "$arch" --argjson cfg "$cfg" '{
        created: "1970-01-01T00:00:00Z", architecture: $arch, os: "linux",
        config: $cfg,
        rootfs: {type: "layers",
                 diff_ids: [range(0; $ARGS.positional | length; 4) as $i | $ARGS.positional[$i + 3]]},
        history: [{created: "1970-01-01T00:00:00Z", created_by: "tests/images/build.sh"}]}' \
        --args "${fields[@]}" > "$STAGE/config.json"
    local cd cs
    read -r cd cs < <(blob "$layout" "$STAGE/config.json")
    jq -cn --arg cd "$cd" --argjson cs "$cs" '{
        schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
        layers: [range(0; $ARGS.positional | length; 4) as $i | $ARGS.positional[$i:$i + 3] |
                 {mediaType: .[0], digest: .[1], size: (.[2] | tonumber)}]}' \
        --args "${fields[@]}" > "$STAGE/manifest.json"
    blob "$layout" "$STAGE/manifest.json"
}

# image LAYOUT ARCH USER LABEL LAYER...: podscope's own images' config
#   -> "<manifest digest> <manifest size>"
image() {
    local layout=$1 arch=$2 user=$3 label=$4
    shift 4
    image_config "$layout" "$arch" "$(jq -cn --arg user "$user" --arg lbl "$label" \
        '{User: $user, Env: ["PATH=/bin"], Cmd: ["/bin/sh"], Labels: {"org.podscope.test": $lbl}}')" "$@"
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

# --- critest's images --------------------------------------------------------
# Working stand-ins for what critest v1.29.0 pulls and runs, amd64, built on
# Debian's busybox as most of the real ones are on busybox: one gzip layer
# of busybox they share (the base), and a small layer of their own for
# those that add files (pause has its one layer alone):
#
#   e2e-test-images/busybox:1.29-2    the default container image: every
#     (and docker.io busybox:latest)  busybox applet, pgrep and ipcs (scripts:
#                                     Debian's busybox lacks them),
#                                     /etc/passwd and /etc/group with root,
#                                     www-data, nobody
#   k8s-staging-cri-tools/test-image-{latest,tag:test,tag:all,tags:1-3,1,2,3}
#                                     the same root, each its own image but
#                                     test-image-tags:1-3 (one image)
#   .../test-image-user-{uid,username,uid-group,username-group}
#                                     USER 1002, www-data, 1003:1004, www-data:1004
#   .../test-image-predefined-group   USER 1000 (default-user), a member of
#                                     group-defined-in-image (gid 50000)
#   e2e-test-images/nginx:1.14-2      an "nginx" master process (standin.c)
#                                     serving HTTP 200 on :80, its pid in
#                                     /var/run/nginx.pid
#   .../hostnet-nginx-amd64           the same on :12003
#   e2e-test-images/httpd:2.4.39-4    a web server on :80 whose log names
#                                     "httpd -D FOREGROUND"
#   e2e-test-images/nonewprivs:1.3    /usr/local/bin/nnp, setuid root, prints
#                                     "Effective uid: N"
#   registry.k8s.io/pause:3.6, :3.9   /pause alone: a sandbox's process
#   (and k8s.gcr.io/pause:3.9)        (containerd's sandbox_image); 3.9 one
#                                     image under both names, 3.6 another
#
# (test-image-digest is not here: critest names it by a digest of gcr.io's
# that no image built here can have.)

# The stand-in programs: one static binary (no libc in the images that
# only need it), installed under each name it answers to.
"$CC" -static -Os -s -Wall -Wl,--build-id=none -o "$STAGE/standin" "$HERE/standin.c" \
    || { say "compiling standin.c with $CC -static failed (a static libc: libc6-dev)"; exit 1; }

CRITEST_PATH=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The libraries a dynamically linked busybox loads, at the paths its loader
# looks in (none for busybox-static).
CRITEST_LIBS=$(ldd "$BUSYBOX_SH" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' || true)

# critest_base DIR: what every busybox-based stand-in holds, as a busybox
# image does. The applets are hard links, as in busybox's own images, not
# symlinks: critest's MaskedPaths spec bind-mounts /dev/null over /bin/ls,
# which through a symlink would mask busybox itself, and with it sh.
critest_base() {
    local d=$1 lib
    mkdir -p "$d"/{bin,dev,etc,home,proc,root,sys,tmp,usr/bin,usr/sbin,usr/local/bin,var/run,var/www}
    chmod 1777 "$d/tmp"
    chmod 0700 "$d/root"
    install -m 0755 "$BUSYBOX_SH" "$d/bin/busybox"
    # Some 300 links: one process (perl is Essential on Debian), not one each.
    "$BUSYBOX_SH" --list | (cd "$d/bin" &&
        perl -ne 'chomp; next if $_ eq "busybox" || -e $_; link("busybox", $_) or die "link $_: $!\n"')
    # What critest runs that Debian's busybox has no applet for.
    install -m 0755 "$HERE/pgrep" "$d/bin/pgrep"
    install -m 0755 "$HERE/ipcs" "$d/bin/ipcs"
    for lib in $CRITEST_LIBS; do
        install -D -m 0755 "$lib" "$d$lib"
    done
    # The users and groups critest names: root, www-data (the images with
    # a USER by name), nobody (RunAsUserName).
    printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' \
        'daemon:x:1:1:daemon:/usr/sbin:/bin/false' \
        'bin:x:2:2:bin:/bin:/bin/false' \
        'sys:x:3:3:sys:/dev:/bin/false' \
        'www-data:x:33:33:www-data:/var/www:/bin/false' \
        'nobody:x:65534:65534:nobody:/home:/bin/false' > "$d/etc/passwd"
    printf '%s\n' 'root:x:0:' 'daemon:x:1:' 'bin:x:2:' 'sys:x:3:' 'www-data:x:33:' \
        'nogroup:x:65534:' > "$d/etc/group"
}
rm -rf "$STAGE/critest-base"
critest_base "$STAGE/critest-base"
# Its layer, made once and shared as images on one base share it: the
# images that add nothing to the base differ by their configs (labels,
# users); the others add a small layer of their own.
BASE_LAYER=$(layer "$STAGE/critest-base" "$STAGE/base-layout" gzip)

# critest_config USER CMD LABEL [EXTRA]: an image's "config" (CMD and
# EXTRA are JSON; EXTRA's keys are added).
critest_config() {
    jq -cn --arg user "$1" --argjson cmd "$2" --arg lbl "$3" --arg path "$CRITEST_PATH" \
        --argjson extra "${4:-{\}}" \
        '{User: $user, Env: [$path], Cmd: $cmd, WorkingDir: "/",
          Labels: {"org.podscope.test": $lbl}} + $extra'
}

# critest_image LAYOUT CONFIG [DIR]: the base, plus DIR as a second layer
# when given.  -> "<manifest digest> <manifest size>"
critest_image() {
    local layout=$1 cfg=$2 media d s diff
    read -r media d s diff <<<"$BASE_LAYER"
    mkdir -p "$layout/blobs/sha256"
    cp "$STAGE/base-layout/blobs/sha256/${d#sha256:}" "$layout/blobs/sha256/"
    if [[ -n ${3:-} ]]; then
        image_config "$layout" amd64 "$cfg" "$BASE_LAYER" "$(layer "$3" "$layout" gzip)"
    else
        image_config "$layout" amd64 "$cfg" "$BASE_LAYER"
    fi
}

# busybox_image LAYOUT USER LABEL: a plain busybox stand-in.
busybox_image() {
    critest_image "$1" "$(critest_config "$2" '["sh"]' "$3")"
}

# fresh_dir: an empty $STAGE/add for an image's own layer.
fresh_dir() {
    rm -rf "$STAGE/add"
    mkdir -p "$STAGE/add"
}

L=$OUT/e2e-busybox
read -r d s < <(busybox_image "$L" "" e2e-busybox)
tag "$L" 1.29-2 "$d" "$s" $OCI_MANIFEST "$E2E/busybox"
tag "$L" latest "$d" "$s" $OCI_MANIFEST "docker.io/library/busybox"

# The Image Manager specs' images. test-image-tags' three tags are one
# image; the other names are an image each.
L=$OUT/critest-latest
read -r d s < <(busybox_image "$L" "" test-image-latest)
tag "$L" latest "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-latest"
L=$OUT/critest-tag
for t in test all; do
    read -r d s < <(busybox_image "$L" "" "test-image-tag-$t")
    tag "$L" "$t" "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-tag"
done
L=$OUT/critest-tags
read -r d s < <(busybox_image "$L" "" test-image-tags)
for n in 1 2 3; do
    tag "$L" "$n" "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-tags"
done
for n in 1 2 3; do
    L=$OUT/critest-$n
    read -r d s < <(busybox_image "$L" "" "test-image-$n")
    tag "$L" latest "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-$n"
done
for pair in "uid:1002" "username:www-data" "uid-group:1003:1004" "username-group:www-data:1004"; do
    name=${pair%%:*}
    user=${pair#*:}
    L=$OUT/critest-user-$name
    read -r d s < <(busybox_image "$L" "$user" "user-$name")
    tag "$L" latest "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-user-$name"
done

# USER 1000 is default-user, whose groups in the image (/etc/group) are its
# own and group-defined-in-image (50000): critest expects `id -G` to give
# "1000 1234 50000" with supplemental group 1234 added. The second layer's
# /etc/passwd and /etc/group replace the base's.
L=$OUT/critest-group
fresh_dir
mkdir -p "$STAGE/add/etc" "$STAGE/add/home/default-user"
{ cat "$STAGE/critest-base/etc/passwd"
  echo 'default-user:x:1000:1000::/home/default-user:/bin/sh'; } > "$STAGE/add/etc/passwd"
{ cat "$STAGE/critest-base/etc/group"
  printf '%s\n' 'default-user:x:1000:' 'group-defined-in-image:x:50000:default-user'; } \
    > "$STAGE/add/etc/group"
chown 1000:1000 "$STAGE/add/home/default-user"
read -r d s < <(critest_image "$L" "$(critest_config 1000 '["sh"]' predefined-group)" "$STAGE/add")
tag "$L" latest "$d" "$s" $OCI_MANIFEST "$CRITEST/test-image-predefined-group"

# web_layer PORT: nginx's stand-in in $STAGE/add, listening on PORT.
web_layer() {
    fresh_dir
    mkdir -p "$STAGE/add/usr/sbin" "$STAGE/add/etc/nginx/conf.d" "$STAGE/add/usr/share/nginx/html"
    install -m 0755 "$STAGE/standin" "$STAGE/add/usr/sbin/nginx"
    printf 'server {\n    listen %s;\n    root /usr/share/nginx/html;\n}\n' "$1" \
        > "$STAGE/add/etc/nginx/conf.d/default.conf"
    echo '<html><body>podscope test page</body></html>' > "$STAGE/add/usr/share/nginx/html/index.html"
}
NGINX_CMD='["nginx", "-g", "daemon off;"]'
L=$OUT/e2e-nginx
web_layer 80
read -r d s < <(critest_image "$L" \
    "$(critest_config "" "$NGINX_CMD" nginx '{"ExposedPorts": {"80/tcp": {}}}')" "$STAGE/add")
tag "$L" 1.14-2 "$d" "$s" $OCI_MANIFEST "$E2E/nginx"
L=$OUT/critest-hostnet-nginx
web_layer 12003
read -r d s < <(critest_image "$L" \
    "$(critest_config "" "$NGINX_CMD" hostnet-nginx '{"ExposedPorts": {"12003/tcp": {}}}')" "$STAGE/add")
tag "$L" latest "$d" "$s" $OCI_MANIFEST "$CRITEST/hostnet-nginx-amd64"

L=$OUT/e2e-httpd
fresh_dir
mkdir -p "$STAGE/add/usr/local/bin" "$STAGE/add/usr/local/apache2/htdocs"
install -m 0755 "$STAGE/standin" "$STAGE/add/usr/local/bin/httpd-foreground"
echo '<html><body>podscope test page</body></html>' > "$STAGE/add/usr/local/apache2/htdocs/index.html"
read -r d s < <(critest_image "$L" \
    "$(critest_config "" '["httpd-foreground"]' httpd \
        '{"ExposedPorts": {"80/tcp": {}}, "WorkingDir": "/usr/local/apache2"}')" "$STAGE/add")
tag "$L" 2.4.39-4 "$d" "$s" $OCI_MANIFEST "$E2E/httpd"

# nnp is setuid root: run as uid 1000 it prints "Effective uid: 0" unless
# no_new_privs is set, then "Effective uid: 1000".
L=$OUT/e2e-nonewprivs
fresh_dir
mkdir -p "$STAGE/add/usr/local/bin"
install -m 4755 -o 0 -g 0 "$STAGE/standin" "$STAGE/add/usr/local/bin/nnp"
read -r d s < <(critest_image "$L" "$(critest_config "" '["/usr/local/bin/nnp"]' nonewprivs)" "$STAGE/add")
tag "$L" 1.3 "$d" "$s" $OCI_MANIFEST "$E2E/nonewprivs"

# The pause image: /pause alone, one layer, run as 65535 as the real one is.
# 3.9 is one image under both of its names (critest 1.36 pulls it from
# each and expects one id, and its removal by one name to remove both);
# 3.6 is another (its config says so), as the real ones are, so that no
# spec counting 3.9's tags finds 3.6's among them.
L=$OUT/pause
fresh_dir
install -m 0755 "$STAGE/standin" "$STAGE/add/pause"
pause_layer=$(layer "$STAGE/add" "$L" gzip)
for v in 3.6 3.9; do
    read -r d s < <(image_config "$L" amd64 \
        "$(critest_config 65535:65535 null "pause $v" '{"Entrypoint": ["/pause"]}')" "$pause_layer")
    if [[ $v == 3.9 ]]; then
        tag "$L" "$v" "$d" "$s" $OCI_MANIFEST registry.k8s.io/pause k8s.gcr.io/pause
    else
        tag "$L" "$v" "$d" "$s" $OCI_MANIFEST registry.k8s.io/pause
    fi
done

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

# An image whose config names a StopSignal (SIGUSR1): StopContainer sends
# it first, instead of SIGTERM.
L=$OUT/stopsignal
rm -rf "$STAGE/root"
mkdir -p "$STAGE/root"
busybox_root "$STAGE/root"
echo stopsignal > "$STAGE/root/etc/podscope-test-image"
read -r d s < <(image_config "$L" amd64 \
    "$(jq -cn '{User: "", Env: ["PATH=/bin"], Cmd: ["/bin/sh"], StopSignal: "SIGUSR1",
               Labels: {"org.podscope.test": "stopsignal"}}')" \
    "$(layer "$STAGE/root" "$L" gzip)")
tag "$L" latest "$d" "$s" $OCI_MANIFEST podscope-test/stopsignal

# An image with a layer no other image has, for RemoveImage while
# containers use it (its layer must stay, then go with them).
L=$OUT/inuse
read -r d s < <(simple "$L" "" inuse)
tag "$L" latest "$d" "$s" $OCI_MANIFEST podscope-test/inuse

echo "build.sh: $(wc -l < "$OUT/images.list") tags in $OUT" >&2
