#!/bin/bash
# make node: a real node. Debian 12 booted by its own kernel with systemd as
# PID 1 on pure cgroup v2, in a VM (qemu; KVM where it runs a guest, TCG
# otherwise), podscope installed from the .deb `make deb` built with apt,
# and the node suite (tests/node/main.rs) run in it. The time of each step
# is printed; any step failing fails the run, with the VM's console and,
# after a boot, its journal.
#
#   run-node.sh DEB
#
# Environment: NODE_CACHE (the image cache, outside the repository;
# /var/cache/podscope-node), CRICTL, KUBELET (1.26), and from
# Kubernetes 1.36 KUBELET_1_36_XZ, CRITEST_1_36_XZ and CRICTL_1_36_XZ;
# NODE_FOCUS runs only the cases whose name holds one of its |-separated words.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DEB=${1:?usage: run-node.sh DEB}
CACHE=${NODE_CACHE:-/var/cache/podscope-node}
WORK=$REPO/target/node
CRICTL=${CRICTL:?CRICTL= is required}
KUBELET=${KUBELET:?KUBELET= (1.26) is required}
KUBELET_1_36_XZ=${KUBELET_1_36_XZ:?KUBELET_1_36_XZ= is required}
CRITEST_1_36_XZ=${CRITEST_1_36_XZ:?CRITEST_1_36_XZ= is required}
CRICTL_1_36_XZ=${CRICTL_1_36_XZ:?CRICTL_1_36_XZ= is required}
# The whole boot and suite, past which the VM is stopped and the run fails.
VM_TIMEOUT=${VM_TIMEOUT:-720}
say() { echo "node: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
t_start=$(date +%s.%N)
step_t=$t_start
step() { # the time of the step just done
    local now; now=$(date +%s.%N)
    printf 'node: step %-8s %6.1f s\n' "$1" "$(echo "$now - $step_t" | bc)" >&2
    step_t=$now
}
for t in "$CRICTL" "$KUBELET" "$KUBELET_1_36_XZ" "$CRITEST_1_36_XZ" "$CRICTL_1_36_XZ" "$DEB"; do
    [[ -f $t ]] || fail "$t not found"
done
command -v qemu-system-x86_64 >/dev/null || fail "qemu-system-x86_64 not found (make deps installs it)"

# The suite, built here (the same glibc as the node's: both Debian 12).
SUITE=$("$REPO/tests/harness/test-binary.sh" node) || fail "building the node suite"
step suite

base=$("$HERE/image.sh" "$CACHE") || fail "building the node image"
step image

# The root: the cached base, podscope's package installed as a user does,
# the suite and its tools beside it.
# A run killed before its cleanup may have left /proc, /sys and /dev bound
# under the old root: those go first, and rm never crosses a mount.
awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r \
    | while read -r m; do umount -l "$m" || true; done
rm -rf --one-file-system "$WORK"
mkdir -p "$WORK/root"
tar -C "$WORK/root" -xf "$base" || fail "unpacking $base"
ROOT=$WORK/root
mounts=()
cleanup() {
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null || true; done
    [[ -n ${QEMU_PID:-} ]] && kill "$QEMU_PID" 2>/dev/null || true
}
trap cleanup EXIT
for m in proc sys dev; do
    mount --rbind "/$m" "$ROOT/$m" && mounts+=("$ROOT/$m")
done
cp "$DEB" "$ROOT/tmp/"
chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "/tmp/$(basename "$DEB")" > "$WORK/apt.log" 2>&1 \
    || { cat "$WORK/apt.log" >&2; fail "apt-get install of $(basename "$DEB") in the node image"; }
rm -f "$ROOT/tmp/$(basename "$DEB")"
cleanup
mounts=()
LIB=$ROOT/usr/local/lib/podscope-node
install -D -m 0755 "$SUITE" "$LIB/node-suite"
install -D -m 0755 "$HERE/in-vm.sh" "$LIB/run"
# kubelet's start and stop, as make e2e runs them (the suite's working
# directory is $LIB).
install -D -m 0755 "$REPO/tests/e2e/kubelet.sh" "$LIB/tests/e2e/kubelet.sh"
# NODE_FOCUS: only the cases whose name holds one of its |-separated words.
[[ -n ${NODE_FOCUS:-} ]] && printf '%s' "$NODE_FOCUS" > "$LIB/focus"
install -D -m 0755 "$CRICTL" "$LIB/bin/crictl"
install -D -m 0755 "$KUBELET" "$LIB/bin/kubelet-1.26"
xz -dc "$KUBELET_1_36_XZ" > "$LIB/bin/kubelet-1.36" && chmod 0755 "$LIB/bin/kubelet-1.36"
xz -dc "$CRITEST_1_36_XZ" > "$LIB/bin/critest" && chmod 0755 "$LIB/bin/critest"
xz -dc "$CRICTL_1_36_XZ" > "$LIB/bin/crictl-1.36" && chmod 0755 "$LIB/bin/crictl-1.36"
"$HERE/registry.sh" "$ROOT/var/lib/docker-registry" || fail "filling the node's registry"
chroot "$ROOT" chown -R docker-registry: /var/lib/docker-registry
install -m 0644 "$HERE/registry.yml" "$ROOT/etc/docker/registry/config.yml"
# What an operator of an offline node writes: the registry mirrors and a
# CNI network (the harness's own).
install -D -m 0644 "$REPO/tests/harness/registry/registries.conf" "$ROOT/etc/containers/registries.conf"
install -D -m 0644 "$REPO/tests/harness/cni/10-podscope-test.conflist" "$ROOT/etc/cni/net.d/10-podscope-test.conflist"
kernel=$(ls "$ROOT"/boot/vmlinuz-* | tail -n1)
initrd=$(ls "$ROOT"/boot/initrd.img-* | tail -n1)
cp "$kernel" "$WORK/vmlinuz" && cp "$initrd" "$WORK/initrd.img"
step install

# The node's disk, from the root (kept until the node passed: a node that
# stalls is booted once more from a fresh disk).
make_disk() {
    rm -f "$WORK/root.img"
    truncate -s 6G "$WORK/root.img"
    mkfs.ext4 -q -F -d "$ROOT" "$WORK/root.img" || fail "making the node's disk"
}
make_disk
step disk

# KVM only where it runs a guest: here /dev/kvm opens but a guest under it
# never leaves the firmware, so it is tried (a kernel that must print its
# banner within 15 s), once per boot of this machine, and TCG used
# otherwise. NODE_ACCEL= forces one.
accel=${NODE_ACCEL:-}
if [[ -z $accel ]]; then
    probe=$CACHE/kvm-$(cat /proc/sys/kernel/random/boot_id)
    if [[ ! -s $probe ]]; then
        rm -f "$CACHE"/kvm-*
        verdict=tcg,thread=multi
        if [[ -w /dev/kvm ]] && timeout 15 qemu-system-x86_64 -accel kvm -m 256 -nographic -no-reboot \
            -nic none -kernel "$WORK/vmlinuz" -append "console=ttyS0 panic=-1" 2>/dev/null \
            | grep -q "Linux version"; then
            verdict=kvm
        fi
        echo "$verdict" > "$probe"
    fi
    accel=$(cat "$probe")
fi
append="root=/dev/vda rw console=ttyS0 quiet panic=-1 systemd.run=/usr/local/lib/podscope-node/run"
append+=" systemd.run_success_action=poweroff systemd.run_failure_action=poweroff"
append+=" podscope_node.vm_timeout=$VM_TIMEOUT ${NODE_CMDLINE:-}"

# The node's journal read off its disk, for a node that hung: the kernel
# writes what journald mmapped back within half a minute, so all but the
# last seconds are there.
journal_back() {
    rm -rf "$WORK/journal"
    debugfs -R "rdump /var/log/journal $WORK" "$WORK/root.img" >/dev/null 2>&1 || true
    if journalctl -D "$WORK/journal" --no-pager -o short-monotonic > "$WORK/journal.txt" 2>/dev/null \
        && [[ -s $WORK/journal.txt ]]; then
        say "the node's journal off its disk (last 150 lines; all in $WORK/journal.txt):"
        tail -n 150 "$WORK/journal.txt" >&2
    else
        say "no journal could be read off the node's disk"
    fi
}
stop_node() {
    kill "$QEMU_PID" 2>/dev/null
    wait "$QEMU_PID" 2>/dev/null
    QEMU_PID=
    tail -n 60 "$WORK/console.log" >&2 || true
    journal_back
}

# boot: run the node until it powers off (0), stops printing for STALL
# seconds once its suite is under way (2: while a case runs it prints a
# line a minute, so silence means the node is frozen), or outlives
# VM_TIMEOUT (the run fails).
STALL=${NODE_STALL:-240}
boot() {
    say "booting the node (accel $accel)"
    : > "$WORK/console.log"
    qemu-system-x86_64 -accel "$accel" -smp 2 -m 4096 \
        -kernel "$WORK/vmlinuz" -initrd "$WORK/initrd.img" -append "$append" \
        -drive file="$WORK/root.img",if=virtio,format=raw \
        -nographic -no-reboot -nic none -serial "file:$WORK/console.log" -monitor none \
        -display none > "$WORK/qemu.log" 2>&1 &
    QEMU_PID=$!
    local now deadline=$(($(date +%s) + VM_TIMEOUT)) size=0 seen
    seen=$(date +%s)
    while kill -0 "$QEMU_PID" 2>/dev/null; do
        now=$(date +%s)
        if ((now > deadline)); then
            stop_node
            fail "the node did not finish within ${VM_TIMEOUT} s (console: $WORK/console.log)"
        fi
        if (($(stat -c %s "$WORK/console.log") != size)); then
            size=$(stat -c %s "$WORK/console.log")
            seen=$now
        elif ((now - seen > STALL)) && grep -q '^node-suite: the suite may take' "$WORK/console.log"; then
            say "the node printed nothing for $STALL s, though its suite says a line a minute: frozen"
            stop_node
            return 2
        fi
        sleep 1
    done
    wait "$QEMU_PID" || { cat "$WORK/qemu.log" >&2; fail "qemu failed"; }
    QEMU_PID=
}
rc=0
boot || rc=$?
if ((rc == 2)); then
    # Once: a node frozen whole (no line from its suite's heartbeat, nor
    # from its kernel) is the emulator's, not a case's (a hung case is
    # named by the suite's own watchdog). A second freeze fails the run.
    say "booting the node once more, from a fresh disk, after the freeze above"
    cp "$WORK/console.log" "$WORK/console-frozen.log"
    make_disk
    rc=0
    boot || rc=$?
    ((rc == 0)) || fail "the node froze twice (consoles: $WORK/console-frozen.log, $WORK/console.log)"
fi
rm -rf --one-file-system "$ROOT"
step vm

# What the suite left on the disk: its verdict and, on failure, the journal;
# the checkpoint archive kubelet's API wrote, when that case ran (for
# checkpointctl, outside).
debugfs -R "dump /var/lib/podscope-node/result $WORK/result" "$WORK/root.img" >/dev/null 2>&1 || true
rm -f "$WORK/kubelet-checkpoint.tar"
debugfs -R "dump /var/lib/podscope-node/kubelet-checkpoint.tar $WORK/kubelet-checkpoint.tar" "$WORK/root.img" >/dev/null 2>&1 || true
[[ -s $WORK/kubelet-checkpoint.tar ]] || rm -f "$WORK/kubelet-checkpoint.tar"
grep '^node-suite:' "$WORK/console.log" | sed 's/\r$//' >&2 || true
if [[ $(cat "$WORK/result" 2>/dev/null) != passed ]]; then
    debugfs -R "dump /var/lib/podscope-node/journal.txt $WORK/journal.txt" "$WORK/root.img" >/dev/null 2>&1 || true
    if [[ -s $WORK/journal.txt ]]; then
        say "the node's journal (last 150 lines; all in $WORK/journal.txt):"
        tail -n 150 "$WORK/journal.txt" >&2
    else
        say "no journal came back: the console's end (all in $WORK/console.log):"
        tail -n 80 "$WORK/console.log" >&2
    fi
    fail "the node suite did not pass (result: $(cat "$WORK/result" 2>/dev/null || echo none))"
fi
rm -f "$WORK/root.img"
printf 'node: passed in %.1f s\n' "$(echo "$(date +%s.%N) - $t_start" | bc)" >&2
