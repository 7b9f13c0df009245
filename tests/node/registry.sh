#!/bin/bash
# The node's registry storage, filled here: a docker-registry on the host's
# loopback (port 5090, its storage the node root's
# /var/lib/docker-registry) takes the images the node suite pulls, pushed
# with skopeo, and stops. Inside the node, Debian's docker-registry.service
# serves them on 127.0.0.1:5000 (registries.conf mirrors the public names
# there, as in the harness): the node pulls through a real registry, and
# under emulation nothing is pushed.
#
#   registry.sh STORAGE_DIR
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STORE=${1:?usage: registry.sh STORAGE_DIR}
IMAGES=$REPO/target/test-images
PORT=5090
# The node suite's images: "<layout> <tag> <repository>" lines of images.list.
WANT='docker.io/library/busybox|registry.k8s.io/e2e-test-images/busybox'
say() { echo "node-registry: $*" >&2; }

"$REPO/tests/images/ensure.sh" "$IMAGES"
mkdir -p "$STORE"
conf=$(mktemp)
log=$(mktemp)
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$conf" "$log"; }
trap 'rc=$?; stop; exit $rc' EXIT
cat > "$conf" <<CONF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $STORE
http:
  addr: 127.0.0.1:$PORT
CONF
/usr/bin/docker-registry serve "$conf" > "$log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/" && break
    sleep 0.1
done
curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/" || { cat "$log" >&2; say "the registry on :$PORT did not come up"; exit 1; }
n=0
while read -r layout tag repo; do
    [[ $repo =~ ^($WANT)$ ]] || continue
    skopeo copy --quiet --dest-tls-verify=false "oci:$layout:$tag" "docker://127.0.0.1:$PORT/$repo:$tag" \
        || { cat "$log" >&2; say "pushing $repo:$tag failed"; exit 1; }
    n=$((n + 1))
done < "$IMAGES/images.list"
((n >= 2)) || { say "the node's images are not in $IMAGES/images.list"; exit 1; }
say "$n tags stored"
