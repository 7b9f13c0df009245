#!/bin/bash
# The bench's anchor: Debian's containerd 1.6 with runc (the runc v2 shim),
# the reference podscope's figures and critest results are read against.
# Runs inside the harness (tests/harness/harness.sh run ...), beside
# podscope and never in its way:
#
#   containerd.sh start    start it; returns once crictl gets answers
#   containerd.sh stop     remove its pods, stop it, and leave nothing behind
#                          (unit, mounts, network namespaces, bridge, cgroups,
#                          files)
#   containerd.sh env      print ANCHOR_ENDPOINT, ANCHOR_UNIT and ANCHOR_SLICE
#                          (the cgroup parent for pods of one's own), for `eval`
#
#   CONTAINERD=PATH        another containerd than Debian's (containerd 2.3
#                          from ../shared/tools, unpacked: make bench); its
#                          containerd-shim-runc-v2 beside it is the one used.
#                          Its config is the same (version 2, which 2.x
#                          migrates); one anchor runs at a time.
#
# What is its own, so that nothing is shared with podscope:
#   unit      containerd-anchor.service (transient; containerd and its shims)
#   socket    /run/containerd-anchor/containerd.sock (ANCHOR_ENDPOINT)
#   root      /var/lib/containerd-anchor, a tmpfs mounted here: the overlayfs
#             snapshotter cannot work on the harness's overlay root
#   state     /run/containerd-anchor (runc's root, network namespaces, the
#             CNI IPAM leases, the sockets)
#   config    /etc/containerd-anchor: config.toml, net.d/ (CNI: bridge
#             anchor0 on 10.234.0.0/24, the plugin chain of
#             tests/harness/cni/10-podscope-test.conflist), certs.d/ (the
#             registry mirrors: registry.k8s.io, gcr.io, docker.io and
#             public.ecr.aws from http://127.0.0.1:5000/<name>, as
#             tests/harness/registry/registries.conf has them for podscope)
# Shared, as on a node running two runtimes: the harness's network and
# mount namespaces, systemd (runc's cgroup driver: pods in the slice
# kubelet or critest names, units cri-containerd-<id>.scope), iptables'
# CNI-HOSTPORT-* chains (portmap; removed at stop if the anchor made them
# and no other pod's rules are in them), /var/lib/cni/results (libcni's
# cache, entries named after the network: containerd-anchor-*), and
# /run/containerd/s, where containerd 1.6 always puts its shims' sockets.
set -euo pipefail

UNIT=containerd-anchor
CONTAINERD=${CONTAINERD:-/usr/bin/containerd}
STATE=/run/containerd-anchor
ROOT=/var/lib/containerd-anchor
CONF=/etc/containerd-anchor
SOCK=$STATE/containerd.sock
ENDPOINT=unix://$SOCK
BRIDGE=anchor0
SUBNET=10.234.0.0/24
NETWORK=containerd-anchor
SANDBOX_IMAGE=registry.k8s.io/pause:3.6
# The cgroup parent of pods the bench makes here (the systemd driver wants a
# slice); critest names test.slice. Both are stopped when empty at the end.
SLICE=anchorpods.slice
SLICES="$SLICE test.slice"
# What existed before start, so that stop removes only what the anchor made.
BEFORE=/run/containerd-anchor.before
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
# crictl: CRICTL (harness.sh names its copy inside when given one), else
# where the harness binds it, else the project's (../shared/tools).
if [[ -z ${CRICTL:-} ]]; then
    CRICTL=$REPO/../shared/tools/crictl
    [[ -x /usr/local/lib/podscope-test/bin/crictl ]] && CRICTL=/usr/local/lib/podscope-test/bin/crictl
fi

say() { echo "anchor: $*" >&2; }
fail() {
    say "FAILED: $*"
    exit 1
}

crictl() { "$CRICTL" --runtime-endpoint "$ENDPOINT" --image-endpoint "$ENDPOINT" --timeout 60s "$@"; }

# CAP_SYS_RESOURCE (capability 24) in our bounding set? Without it no
# process may lower its oom_score_adj, which runc does for every pod
# (-998 for the sandbox) and which fails container creation ("failed to
# update /proc/self/oom_score_adj: Permission denied"): the machines the
# harness runs on lack it.
has_sys_resource() {
    local bnd
    bnd=$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)
    (( (16#$bnd >> 24) & 1 ))
}

write_config() {
    mkdir -p "$CONF/net.d" "$CONF/certs.d"
    # Where no OOM score may be lowered, containerd's own rule for that
    # case: no container's score below containerd's (0 here).
    local restrict_oom=false
    has_sys_resource || restrict_oom=true
    # containerd 1.6's config, version 2. Only what differs from its
    # defaults or must be its own is set.
    cat > "$CONF/config.toml" <<EOF
version = 2
root = "$ROOT"
state = "$STATE"
# Snapshotters that cannot work here (or need what is not installed).
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$ROOT/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$SANDBOX_IMAGE"
  # Under the state directory, not /run/netns (podscope's pods are there).
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = $restrict_oom

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CONF/net.d"
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/bin/runc"
        Root = "$STATE/runc"
        # Pods and containers as systemd scopes, as kubelet's systemd
        # cgroup driver (and podscope) have them.
        SystemdCgroup = true

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$CONF/certs.d"
EOF

    # The pod network: the harness's plugin chain under names of its own.
    cat > "$CONF/net.d/10-$NETWORK.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$SUBNET" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$STATE/cni/networks"
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } },
    { "type": "loopback" }
  ]
}
EOF

    # The mirrors (hosts.toml): each public registry from the harness
    # registry's path of its own name; override_path because that path is
    # the API root (/v2/<name>), not a prefix before /v2.
    local reg server
    for reg in registry.k8s.io gcr.io docker.io public.ecr.aws; do
        server=https://$reg
        [[ $reg == docker.io ]] && server=https://registry-1.docker.io
        mkdir -p "$CONF/certs.d/$reg"
        cat > "$CONF/certs.d/$reg/hosts.toml" <<EOF
server = "$server"

[host."http://127.0.0.1:5000/v2/$reg"]
  capabilities = ["pull", "resolve"]
  override_path = true
EOF
    done
}

start() {
    [[ $EUID -eq 0 ]] || fail "must run as root"
    [[ -x $CONTAINERD ]] || fail "$CONTAINERD is not there (containerd: tests/harness/install-deps.sh)"
    [[ -x /usr/bin/runc ]] || fail "runc is not installed (tests/harness/install-deps.sh)"
    [[ -x $CRICTL ]] || fail "crictl not found at $CRICTL (set CRICTL=)"
    command -v jq >/dev/null || fail "jq is missing (tests/harness/install-deps.sh)"
    [[ $(systemctl is-system-running 2>/dev/null || true) =~ ^(running|degraded)$ ]] \
        || fail "no running systemd: run inside the harness (tests/harness/harness.sh run ...)"
    if systemctl is-active --quiet "$UNIT"; then
        fail "$UNIT is already running (containerd.sh stop first)"
    fi
    # Leftovers of a run that did not stop cleanly go first.
    [[ -e $STATE || -e $ROOT || -e $BEFORE ]] && stop_quietly

    {
        [[ -e /run/containerd ]] && echo /run/containerd
        [[ -e /var/lib/cni ]] && echo /var/lib/cni
        for slice in $SLICES; do
            systemctl is-active --quiet "$slice" && echo "$slice"
        done
        iptables -w -t nat -S CNI-HOSTPORT-DNAT >/dev/null 2>&1 && echo CNI-HOSTPORT-DNAT
    } > "$BEFORE" || true

    mkdir -p "$STATE" "$ROOT"
    mount -t tmpfs -o mode=0711 tmpfs "$ROOT" || fail "cannot mount a tmpfs on $ROOT"
    write_config

    # As Debian's containerd.service runs it: notify, delegated cgroup, no
    # task or file limits, out of the OOM killer's way (where
    # CAP_SYS_RESOURCE allows: systemd ignores the setting otherwise).
    systemctl reset-failed "$UNIT" 2>/dev/null || true
    # Its own shim (beside it) first in PATH.
    systemd-run --quiet --unit="$UNIT" --description="containerd + runc (podscope bench anchor)" \
        --setenv=PATH="$(dirname "$CONTAINERD"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --property=Type=notify --property=Delegate=yes --property=KillMode=control-group \
        --property=TasksMax=infinity --property=LimitNOFILE=1048576 --property=LimitNPROC=infinity \
        --property=LimitCORE=infinity --property=OOMScoreAdjust=-999 \
        "$CONTAINERD" --config "$CONF/config.toml" \
        || { journalctl -u "$UNIT" --no-pager -n 40 >&2; fail "containerd did not start"; }

    # Ready once the CRI answers and reports runtime and network ready.
    local info=
    for _ in $(seq 150); do
        if info=$(crictl info 2>/dev/null) &&
            [[ $(jq -r '[.status.conditions[] | select(.status == true)] | length' <<<"$info") -ge 2 ]]; then
            say "containerd $("$CONTAINERD" --version | awk '{print $3}') + $(runc --version | head -n1 | awk '{print $3}') on $ENDPOINT"
            return 0
        fi
        systemctl is-active --quiet "$UNIT" || break
        sleep 0.2
    done
    journalctl -u "$UNIT" --no-pager -n 40 >&2
    [[ -n $info ]] && jq -c .status.conditions <<<"$info" >&2
    fail "containerd did not become ready on $ENDPOINT"
}

# Remove every pod and container through the CRI, as a node drained would.
drain() {
    local _
    for _ in $(seq 10); do
        crictl rm --all --force >/dev/null 2>&1 || true
        crictl rmp --all --force >/dev/null 2>&1 || true
        [[ -z $(crictl pods -q 2>/dev/null) && -z $(crictl ps -a -q 2>/dev/null) ]] && return 0
        sleep 0.5
    done
    say "WARNING: pods or containers left after 10 rounds of removal: $(crictl pods -q | xargs)"
}

# Unmount everything under DIR, deepest first.
unmount_under() {
    local m
    findmnt -rn -o TARGET | awk -v d="$1" 'index($0, d) == 1' | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || say "WARNING: cannot unmount $m"
    done
}

# slice_empty SLICE: no unit's cgroup below the slice's own (systemd's
# hierarchy: the named one on cgroup v1, the unified one otherwise).
slice_empty() {
    local cg d
    cg=$(systemctl show -P ControlGroup "$1" 2>/dev/null) || return 1
    [[ -n $cg ]] || return 0
    for d in /sys/fs/cgroup/systemd$cg /sys/fs/cgroup/unified$cg /sys/fs/cgroup$cg; do
        if [[ -d $d ]]; then
            [[ -z $(find "$d" -mindepth 1 -type d -print -quit) ]]
            return
        fi
    done
    return 0
}

# portmap's CNI-HOSTPORT-* chains in the nat table, and the jumps to them,
# once no pod's rules are left in them.
remove_hostport_chains() {
    command -v iptables >/dev/null || return 0
    local rules chain rule
    rules=$(iptables -w -t nat -S 2>/dev/null) || return 0
    # A pod's own chains (CNI-DN-*) or rules in the shared ones: still in use.
    grep -qE '^-(N CNI-DN-|A CNI-HOSTPORT-DNAT )' <<<"$rules" && return 0
    grep -q -- '-N CNI-HOSTPORT-' <<<"$rules" || return 0
    # The jumps from the built-in chains, each deleted as it was added.
    grep -E '^-A (PREROUTING|OUTPUT|POSTROUTING) .*-j CNI-HOSTPORT-' <<<"$rules" | while read -r rule; do
        eval "iptables -w -t nat -D ${rule#-A }" || say "WARNING: cannot delete nat rule: $rule"
    done
    for chain in CNI-HOSTPORT-DNAT CNI-HOSTPORT-SETMARK CNI-HOSTPORT-MASQ; do
        if grep -qx -- "-N $chain" <<<"$rules"; then
            iptables -w -t nat -F "$chain" && iptables -w -t nat -X "$chain" \
                || say "WARNING: cannot delete the nat chain $chain"
        fi
    done
}

stop_quietly() {
    if systemctl is-active --quiet "$UNIT" && [[ -S $SOCK ]]; then
        drain
    fi
    systemctl stop "$UNIT" 2>/dev/null || true
    systemctl reset-failed "$UNIT" 2>/dev/null || true

    # Mounts: overlay rootfs and shm of containers and sandboxes, pinned
    # network namespaces (all under the state directory), the root's tmpfs.
    unmount_under "$STATE/"
    unmount_under "$ROOT"
    rm -rf "$STATE" "$ROOT" "$CONF"

    if ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link delete "$BRIDGE" || say "WARNING: cannot delete the bridge $BRIDGE"
    fi
    rm -f /var/lib/cni/results/"$NETWORK"-* 2>/dev/null || true

    local before=
    [[ -f $BEFORE ]] && before=$(cat "$BEFORE")
    # portmap's chains (shared by every CNI runtime here): gone with the
    # last pod's rules only if the anchor made them.
    if ! grep -qx CNI-HOSTPORT-DNAT <<<"$before"; then
        remove_hostport_chains
    fi
    # containerd's shims' sockets (always under /run/containerd/s).
    if ! grep -qx /run/containerd <<<"$before"; then
        rm -rf /run/containerd
    fi
    if ! grep -qx /var/lib/cni <<<"$before"; then
        rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
    fi
    # Cgroups: the pods' scopes go with their processes; the slices they
    # were in (test.slice from critest, $SLICE from the bench) stay active
    # unless stopped, and runc leaves the directories it made in the
    # hierarchies systemd does not manage (cpuset, freezer, ...).
    local slice d
    for slice in $SLICES; do
        grep -qx "$slice" <<<"$before" && continue
        systemctl is-active --quiet "$slice" || continue
        # Only when nothing is in it any more (another runtime's pods may be).
        slice_empty "$slice" && systemctl stop "$slice" 2>/dev/null || true
    done
    find /sys/fs/cgroup -mindepth 2 -depth -type d \( -name 'cri-containerd-*.scope' -o -name test.slice \
        -o -name "$SLICE" \) 2>/dev/null | while read -r d; do
        grep -qx "$(basename "$d")" <<<"$before" && continue
        rmdir "$d" 2>/dev/null || true
    done
    rm -f "$BEFORE"
}

stop() {
    stop_quietly
    # Check what must not be left.
    local left=()
    systemctl is-active --quiet "$UNIT" && left+=("unit $UNIT")
    findmnt -rn -o TARGET | grep -qE "^($STATE|$ROOT)(/|$)" && left+=("mounts under $STATE or $ROOT")
    ip link show "$BRIDGE" >/dev/null 2>&1 && left+=("bridge $BRIDGE")
    [[ -n $(systemctl list-units --plain --no-legend 'cri-containerd-*.scope' 2>/dev/null) ]] \
        && left+=("scopes: $(systemctl list-units --plain --no-legend 'cri-containerd-*.scope' | awk '{print $1}' | xargs)")
    [[ -n $(find /sys/fs/cgroup -mindepth 2 -type d -name 'cri-containerd-*' 2>/dev/null | head -n1) ]] \
        && left+=("cgroups cri-containerd-*")
    pgrep -f containerd-shim-runc-v2 >/dev/null && left+=("shim processes")
    ((${#left[@]} == 0)) || fail "left behind: ${left[*]}"
    say "stopped; nothing left behind"
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    env)
        echo "ANCHOR_ENDPOINT=$ENDPOINT"
        echo "ANCHOR_UNIT=$UNIT"
        echo "ANCHOR_SLICE=$SLICE"
        ;;
    *)
        echo "usage: containerd.sh start|stop|env" >&2
        exit 2
        ;;
esac
