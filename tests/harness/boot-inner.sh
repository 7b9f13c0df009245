#!/bin/bash
# Runs as PID 1 of fresh PID/mount/net/UTS/IPC namespaces (see harness.sh):
# builds a throw-away root (overlay of the machine's / on a tmpfs, private
# /run and /tmp) and execs systemd in it. Every write stays in the tmpfs.
set -euo pipefail
: "${REPO:?REPO must name the repository to bind in}"
: "${HARNESS_TOOLS:?HARNESS_TOOLS must name where CRICTL, CRITEST and KUBELET go inside}"
R=$(mktemp -d /run/podscope-harness.XXXXXX)
mount -t tmpfs -o mode=755 tmpfs "$R"
mkdir -p "$R/upper" "$R/work" "$R/root"
mount -t overlay overlay -o lowerdir=/,upperdir="$R/upper",workdir="$R/work" "$R/root"
N=$R/root
mount -t proc proc "$N/proc"
mount --rbind /sys "$N/sys"
mount --rbind /dev "$N/dev"
# A node of make cluster (harness.sh's HARNESS_NODE): in a cgroup namespace
# of its own, each hierarchy the machine mounts is mounted again, so that it
# shows the namespace's root (the node's cgroup), as a container runtime
# does for a systemd container; host name and machine ID of its own.
if [[ -n ${HARNESS_NODE:-} ]]; then
    # mountinfo: "... MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER".
    mounts=$(awk '{ split($0, a, " - "); split(a[1], l, " "); split(a[2], r, " ") }
        (r[1] == "cgroup" || r[1] == "cgroup2") && index(l[5], "/sys/fs/cgroup") == 1 { print l[5], r[1], r[3] }' \
        /proc/self/mountinfo)
    [[ -n $mounts ]] || { echo "boot-inner: no cgroup hierarchy mounted under /sys/fs/cgroup" >&2; exit 1; }
    # What else the machine has there (hierarchies it lists but does not
    # mount, as plain directories, and their aliases), made again: kubelet
    # makes and removes its pods' cgroups in each hierarchy /proc lists.
    others=$(find /sys/fs/cgroup -mindepth 1 -maxdepth 1 \( -type d -o -type l \) -printf '%y %f %l\n')
    umount -R "$N/sys/fs/cgroup"
    mount -t tmpfs -o mode=755 tmpfs "$N/sys/fs/cgroup"
    while read -r kind name target; do
        case $kind in
            d) mkdir -p "$N/sys/fs/cgroup/$name" ;;
            l) ln -s "$target" "$N/sys/fs/cgroup/$name" ;;
        esac
    done <<<"$others"
    while read -r dir type opts; do
        mkdir -p "$N$dir"
        if [[ $type == cgroup2 ]]; then
            mount -t cgroup2 cgroup2 "$N$dir"
        else
            # The hierarchy's controllers (or name=) from the super options.
            mount -t cgroup -o "$(tr , '\n' <<<"$opts" | grep -Ev '^(rw|ro)$' | paste -sd,)" cgroup "$N$dir"
        fi
    done <<<"$mounts"
    echo "$HARNESS_NODE" > "$N/etc/hostname"
    hostname "$HARNESS_NODE"
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$N/etc/machine-id"
fi
mount -t tmpfs -o mode=755 tmpfs "$N/run"
# systemd-tmpfiles --boot empties /tmp: it must be private.
mount -t tmpfs -o mode=1777 tmpfs "$N/tmp"
# podscope's state on a filesystem of its own, as on a node (ext4, xfs):
# the overlay root cannot hold overlayfs' own whiteouts (0/0 character
# devices) or trusted.overlay.* xattrs, which the image store's layers do.
# Not for the package tests (run-bare), which purge /var/lib/podscope.
if [[ ${HARNESS_MODE:-run} == run ]]; then
    mkdir -p "$N/var/lib/podscope"
    mount -t tmpfs -o mode=755 tmpfs "$N/var/lib/podscope"
fi
# The repository is shared, so target/ (test binaries) is visible inside.
mkdir -p "$N$REPO" && mount --bind "$REPO" "$N$REPO"
# The tests run its binaries as nobody too: its ancestors searchable, on the
# throw-away root only (a checkout under /root, mode 0700, would be out of
# their reach).
d=$REPO
while d=${d%/*}; [[ -n $d ]]; do chmod o+x "$N$d" || true; done
# The tools harness.sh was given (CRICTL=, CRITEST=, KUBELET= and their
# _1_36 kin, resolved), wherever
# they are (under /tmp, hidden by the private /tmp above): read-only at a
# fixed path, which harness.sh gives the command.
for var in CRICTL CRITEST KUBELET CRICTL_1_36 CRITEST_1_36 KUBELET_1_36; do
    [[ -n ${!var:-} ]] || continue
    dest=$N$HARNESS_TOOLS/${var,,}
    mkdir -p "${dest%/*}" && touch "$dest"
    mount --bind -o ro "${!var}" "$dest"
done
# crun 1.27 (CRUN_1_27=, resolved), read-only where podscope.toml's
# crun-userns handler names it (HARNESS_CRUN_1_27).
if [[ -n ${CRUN_1_27:-} ]]; then
    : "${HARNESS_CRUN_1_27:?HARNESS_CRUN_1_27 must name where CRUN_1_27 goes inside}"
    dest=$N$HARNESS_CRUN_1_27
    mkdir -p "${dest%/*}" && touch "$dest"
    mount --bind -o ro "$CRUN_1_27" "$dest"
fi
ip link set lo up
cd "$N"
mkdir -p oldroot
pivot_root . oldroot
umount -l /oldroot
# systemd makes / shared when it boots a machine, but not in a container
# (which it takes this for): do it here, so that mounts made later (a pod's
# netns pinned under /run/netns) propagate into services' mount namespaces
# (podscoped's ProtectSystem=) as they do on a node.
mount --make-rshared /
exec env container=podscope-test /lib/systemd/systemd --system --unit=basic.target \
    --log-target=console --log-level=notice
