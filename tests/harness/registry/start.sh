#!/bin/bash
# Inside the harness: the test images' registries, filled.
#   - registries.conf (mirrors of registry.k8s.io, gcr.io, docker.io and
#     public.ecr.aws to 127.0.0.1:5000) into /etc/containers;
#   - Debian's docker-registry on 127.0.0.1:5000 (anonymous),
#     127.0.0.1:5001 (htpasswd: podscope / $AUTH_PASSWORD) and 127.0.0.1:5005
#     (Bearer tokens from token-server.py on :5006, Docker Hub's scheme), as
#     transient units;
#   - the images tests/images/build.sh made (built once into
#     target/test-images, again when its inputs change) pushed with skopeo.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
IMAGES=$REPO/target/test-images
AUTH_PASSWORD=podscope-s3cret
say() { echo "registry: $*" >&2; }

install -D -m 0644 "$HERE/registries.conf" /etc/containers/registries.conf
rm -f /etc/containers/registries.conf.d/*.conf 2>/dev/null || true
mkdir -p /var/lib/podscope-test/registry /var/lib/podscope-test/registry-auth
htpasswd -Bbn podscope "$AUTH_PASSWORD" > /var/lib/podscope-test/htpasswd

# The token registry's signing key and the certificate it trusts.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=podscope-test-token \
    -keyout /var/lib/podscope-test/token.key -out /var/lib/podscope-test/token.crt 2>/dev/null
mkdir -p /var/lib/podscope-test/registry-token
systemctl stop podscope-test-token 2>/dev/null || true
systemctl reset-failed podscope-test-token 2>/dev/null || true
systemd-run --quiet --unit=podscope-test-token /usr/bin/python3 "$HERE/token-server.py" 5006 \
    /var/lib/podscope-test/token.key /var/lib/podscope-test/token.crt

for unit in registry:config.yml:5000 registry-auth:config-auth.yml:5001 registry-token:config-token.yml:5005; do
    IFS=: read -r name conf port <<<"$unit"
    systemctl stop "podscope-test-$name" 2>/dev/null || true
    systemctl reset-failed "podscope-test-$name" 2>/dev/null || true
    systemd-run --quiet --unit="podscope-test-$name" --property=Type=simple \
        /usr/bin/docker-registry serve "$HERE/$conf"
done
for port in 5000 5001 5005 5006; do
    for _ in $(seq 100); do
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/" || true)
        [[ $code == 200 || $code == 401 || $code == 404 ]] && break
        sleep 0.1
    done
    [[ $code == 200 || $code == 401 || $code == 404 ]] || { say "the registry on $port did not come up"; journalctl -u "podscope-test-registry*" --no-pager -n 30 >&2; exit 1; }
done

"$REPO/tests/images/ensure.sh" "$IMAGES"
n=0
while read -r layout tag repo; do
    dest=127.0.0.1:5000/$repo
    creds=()
    if [[ $repo == auth:* ]]; then
        # Behind htpasswd (Basic) on :5001 and behind tokens on :5005.
        skopeo copy --quiet --all --dest-tls-verify=false --dest-creds "podscope:$AUTH_PASSWORD" \
            "oci:$layout:$tag" "docker://127.0.0.1:5005/${repo#auth:}:$tag" \
            || { say "pushing $repo:$tag to the token registry failed"; exit 1; }
        dest=127.0.0.1:5001/${repo#auth:}
        creds=(--dest-creds "podscope:$AUTH_PASSWORD")
    fi
    skopeo copy --quiet --all --dest-tls-verify=false "${creds[@]}" \
        "oci:$layout:$tag" "docker://$dest:$tag" \
        || { say "pushing $repo:$tag failed"; exit 1; }
    n=$((n + 1))
done < "$IMAGES/images.list"
say "$n tags pushed to 127.0.0.1:5000 and :5001"
