#!/bin/bash
# Inside the node (systemd.run= on the kernel command line starts this as
# a unit once systemd is up, and powers the node off when it ends): bring
# up what the suite needs without waiting for boot to finish (this unit is
# part of it), run the node suite, leave its verdict and, on failure, the
# journal in /var/lib/podscope-node for tests/node/run-node.sh to read off
# the disk.
set -uo pipefail
LIB=/usr/local/lib/podscope-node
OUT=/var/lib/podscope-node
mkdir -p "$OUT"
echo running > "$OUT/result"
exec > >(tee -a "$OUT/suite.log" > /dev/ttyS0) 2>&1
say() { echo "node-suite: $*"; }
finish() {
    local rc=$1
    if ((rc == 0)); then
        echo passed > "$OUT/result"
    else
        echo "failed ($rc)" > "$OUT/result"
        journalctl -b --no-pager -o short-monotonic > "$OUT/journal.txt" 2>&1
    fi
    sync
    exit "$rc"
}
say "up: $(uname -r), systemd $(systemctl --version | head -n1 | cut -d' ' -f2), /sys/fs/cgroup is $(stat -f -c %T /sys/fs/cgroup)"

# Jobs of this boot may wait for boot to finish (this unit is part of
# it): the bus and polkit are started and waited for, the rest is asked
# for and polled.
timeout 60 systemctl start dbus.socket polkit.service \
    || { say "FAILED: the system bus or polkit did not start"; finish 1; }
systemctl start --no-block docker-registry.service
up() { timeout 5 busctl status >/dev/null 2>&1 && curl -sf --max-time 2 -o /dev/null http://127.0.0.1:5000/v2/; }
for _ in $(seq 60); do
    up && break
    sleep 0.5
done
up || { say "FAILED: no system bus or no registry: $(systemctl is-active dbus.service docker-registry.service | xargs)"; finish 1; }
# podscope's socket as its package left it: enabled (boot would start it,
# but boot waits for this unit).
[[ $(systemctl is-enabled podscope-cri.socket) == enabled ]] \
    || { say "FAILED: podscope-cri.socket is not enabled by the package"; finish 1; }
timeout 60 systemctl start podscope-cri.socket || { say "FAILED: podscope-cri.socket did not start"; finish 1; }
say "the bus, polkit, the registry and podscope-cri.socket are up"

# Within the VM's own limit (podscope_node.vm_timeout= on the kernel
# command line, from run-node.sh), less the time booting took and a
# minute for the journal and the power-off, so a hang still brings the
# journal back however slow the boot was.
vm_timeout=$(sed -n 's/.*podscope_node\.vm_timeout=\([0-9]*\).*/\1/p' /proc/cmdline)
SUITE_TIMEOUT=${SUITE_TIMEOUT:-$((${vm_timeout:-600} - $(cut -d. -f1 /proc/uptime) - 60))}
((SUITE_TIMEOUT >= 30)) || SUITE_TIMEOUT=30
say "the suite may take $SUITE_TIMEOUT s (booted in $(cut -d' ' -f1 /proc/uptime) s)"
cd "$LIB"
PATH=$LIB/bin:$PATH CRICTL=$LIB/bin/crictl CRITEST=$LIB/bin/critest KUBELET_1_26=$LIB/bin/kubelet-1.26 \
    KUBELET_1_36=$LIB/bin/kubelet-1.36 NODE_FOCUS=$(cat focus 2>/dev/null) \
    timeout "$SUITE_TIMEOUT" "$LIB/node-suite"
rc=$?
((rc == 124)) && say "FAILED: the suite did not finish within $SUITE_TIMEOUT s"
finish $rc
