#!/bin/bash
# A real systemd for podscope's tests:
# systemd as PID 1 of private namespaces on a copy-on-write view of this
# machine, with its own system bus and polkit, podscope installed into it by
# `make install` as a packager would.
#
#   harness.sh run CMD [ARGS...]   boot, install, run CMD inside (cwd = repo),
#                                  shut down; exit with CMD's status
#   harness.sh run-bare CMD [ARGS...]
#                                  the same without installing podscope (the
#                                  package tests install the .deb themselves)
#   harness.sh serve READY_FILE    boot and install as `run` does, write
#                                  systemd's PID (outside) to READY_FILE,
#                                  then stay up until SIGTERM, and shut down
#                                  (make cluster's nodes: tests/cluster)
#
#   HARNESS_NODE=NAME              a node of several at once (make cluster):
#                                  its own cgroup tree, the cgroup namespace
#                                  rooted at <hierarchy>/podscope-node-NAME
#                                  below this process's cgroup in every
#                                  mounted hierarchy (so each systemd, and
#                                  each kubelet's kubepods.slice, has one of
#                                  its own), host name NAME, a machine ID of
#                                  its own. It takes no lock: whoever starts
#                                  several holds the harness's lock for them.
#
#   CRICTL=, CRITEST=, KUBELET=    Kubernetes' CRI tools and kubelet, anywhere
#   (and CRICTL_1_36=, CRITEST_1_36=, KUBELET_1_36=, Kubernetes 1.36's)
#                                  outside: bound read-only inside at
#                                  $TOOLS/crictl, $TOOLS/critest,
#                                  $TOOLS/kubelet (critest_1_36, ...), and
#                                  CMD gets those paths (a
#                                  checkout under /tmp has them in ../shared,
#                                  which the harness's private /tmp hides)
#   CRUN_1_27=                     crun 1.27.1 (the Makefile unpacks it into
#                                  target/tools/crun-1.27), anywhere outside:
#                                  bound read-only inside at
#                                  /usr/local/lib/podscope-test/crun-1.27/crun;
#                                  with `run`, podscope.toml then lists the
#                                  handlers crun and runc (Debian's, as the
#                                  defaults; crun stays the default) and
#                                  crun-userns (this crun), and CMD gets
#                                  CRUN_1_27 naming it inside. Without it
#                                  the config is make install's (the
#                                  defaults); the suites that need the
#                                  handler (conformance, integration) fail
#                                  when CRUN_1_27 is unset.
#
# Fails loudly (non-zero, with the boot log) when systemd does not come up.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d /tmp/podscope-harness-run.XXXXXX)
LOG=$WORK/boot.log
TOOLS=/usr/local/lib/podscope-test/bin
CRUN_1_27_INSIDE=/usr/local/lib/podscope-test/crun-1.27/crun
# The podscope.toml the harness writes (CRUN_1_27=), kept here too: the
# integration tests put it back after a test of their own config
# (podscope-test-support's harness: restore_config), not the shipped one.
HARNESS_CONFIG=/usr/local/lib/podscope-test/podscope.toml
UNSHARE_PID=
SYSTEMD_PID=

say() { echo "harness: $*" >&2; }
fail() {
    say "FAILED: $*"
    [[ -f $LOG ]] && { say "--- systemd console (last 40 lines) ---"; tail -n 40 "$LOG" >&2; }
    exit 1
}

inside() { nsenter -t "$SYSTEMD_PID" -a "$@"; }

# The CRI tools given, resolved outside (boot-inner.sh binds them in), and
# the environment that names them inside.
TOOL_ENV=()
resolve_tools() {
    local var path
    for var in CRICTL CRITEST KUBELET CRICTL_1_36 CRITEST_1_36 KUBELET_1_36; do
        [[ -n ${!var:-} ]] || continue
        path=$(readlink -f -- "${!var}") && [[ -f $path && -x $path ]] \
            || fail "$var=${!var} is not an executable file"
        export "$var=$path"
        TOOL_ENV+=("$var=$TOOLS/${var,,}")
    done
    if [[ -n ${CRUN_1_27:-} ]]; then
        path=$(readlink -f -- "$CRUN_1_27") && [[ -f $path && -x $path ]] \
            || fail "CRUN_1_27=$CRUN_1_27 is not an executable file"
        export CRUN_1_27=$path
        TOOL_ENV+=("CRUN_1_27=$CRUN_1_27_INSIDE")
    fi
}

cgroup_dirs() { find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sort; }

# A node's cgroup, one per mounted hierarchy: "<mount> <path>" lines, the
# path below this process's own cgroup there (an agent's memory cgroup on
# these machines stays the node's ancestor).
node_cgroups() {
    local _id ctrl path dir
    while IFS=: read -r _id ctrl path; do
        case $ctrl in
            name=systemd) dir=/sys/fs/cgroup/systemd ;;
            "") dir=/sys/fs/cgroup/unified; [[ -d $dir ]] || dir=/sys/fs/cgroup ;;
            *) dir=/sys/fs/cgroup/$ctrl ;;
        esac
        mountpoint -q "$dir" || continue
        echo "$dir ${path%/}/podscope-node-$HARNESS_NODE"
    done < /proc/self/cgroup
}

# Make the node's cgroups and move this shell into them, so that the
# unshare it execs roots the cgroup namespace there.
enter_node_cgroups() {
    local dir path parent f
    while read -r dir path; do
        parent=$dir${path%/*}
        mkdir -p "$dir$path" || fail "cannot make the cgroup $dir$path"
        # A v1 cpuset takes no process until it has CPUs and memory nodes.
        for f in cpuset.cpus cpuset.mems; do
            [[ -f $dir$path/$f && -z $(cat "$dir$path/$f") ]] && cat "$parent/$f" > "$dir$path/$f"
        done
        echo "$BASHPID" > "$dir$path/cgroup.procs" || fail "cannot enter the cgroup $dir$path"
    done < "$WORK/node-cgroups"
}

# The node's cgroups, depth first (empty once its systemd is gone).
remove_node_cgroups() {
    local dir path
    while read -r dir path; do
        [[ -d $dir$path ]] || continue
        find "$dir$path" -depth -type d -exec rmdir {} + 2>/dev/null \
            || say "WARNING: cgroups left under $dir$path"
    done < "$WORK/node-cgroups"
}

boot() {
    [[ $EUID -eq 0 ]] || fail "must run as root (it boots systemd in private namespaces)"
    local cgroupns=()
    if [[ -n ${HARNESS_NODE:-} ]]; then
        [[ $HARNESS_NODE =~ ^[a-z0-9-]+$ ]] || fail "HARNESS_NODE=$HARNESS_NODE: lower-case letters, digits and dashes"
        node_cgroups > "$WORK/node-cgroups"
        [[ -s $WORK/node-cgroups ]] || fail "no cgroup hierarchy mounted under /sys/fs/cgroup"
        cgroupns=(--cgroup)
    else
        exec 9>/run/podscope-harness.lock
        flock -w 600 9 || fail "another harness is running (one at a time: they share the cgroup tree)"
        cgroup_dirs > "$WORK/cgroups.before"
    fi
    say "booting systemd${HARNESS_NODE:+ for node $HARNESS_NODE} (log: $LOG)"
    # (A subshell: it enters the node's cgroups, the harness's own shell
    # stays where it is.)
    (
        [[ -z ${HARNESS_NODE:-} ]] || enter_node_cgroups
        REPO=$REPO HARNESS_MODE=$mode HARNESS_TOOLS=$TOOLS HARNESS_CRUN_1_27=$CRUN_1_27_INSIDE \
            exec unshare --pid --fork --mount --net --uts --ipc "${cgroupns[@]}" --propagation private \
            "$HERE/boot-inner.sh"
    ) > "$LOG" 2>&1 &
    UNSHARE_PID=$!
    for _ in $(seq 100); do
        SYSTEMD_PID=$(pgrep -P "$UNSHARE_PID" -x systemd || true)
        [[ -n $SYSTEMD_PID ]] && break
        kill -0 "$UNSHARE_PID" 2>/dev/null || fail "the namespace setup exited early"
        sleep 0.1
    done
    [[ -n $SYSTEMD_PID ]] || fail "systemd did not start within 10 s"
    local state=
    # Until systemd has its private socket up, systemctl cannot answer at
    # all; until it has made /run/systemd/system, it answers "offline"
    # (no systemd booted) at once.
    for _ in $(seq 180); do
        state=$(timeout 90 nsenter -t "$SYSTEMD_PID" -a systemctl is-system-running --wait 2>/dev/null || true)
        [[ -n $state && $state != offline ]] && break
        kill -0 "$SYSTEMD_PID" 2>/dev/null || fail "systemd exited during boot"
        sleep 0.5
    done
    case $state in
        running) ;;
        degraded) say "system is degraded: $(inside systemctl --failed --no-legend --plain | awk '{print $1}' | xargs)";;
        *) fail "systemd did not reach running (state: ${state:-none})";;
    esac
    say "systemd is up (pid $SYSTEMD_PID outside)"
}

install_project() {
    inside make -s -C "$REPO" install PREFIX=/usr > "$WORK/install.log" 2>&1 \
        || { cat "$WORK/install.log" >&2; fail "make install inside the harness failed"; }
    inside systemctl daemon-reload
    # As a package's preset would: kubelet's endpoint is socket-activated.
    inside systemctl start podscope-cri.socket
    inside busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig
    # The fixture CNI plugin, where the sandboxed daemon can run it (it
    # cannot see the checkout: PrivateTmp=/ProtectHome= hide /tmp and /home).
    inside install -D -m 0755 "$REPO/tests/fixtures/cni/podscope-fixture" \
        /usr/local/lib/podscope-test/cni/podscope-fixture
    say "podscope installed with 'make install PREFIX=/usr'; fixture plugin in /usr/local/lib/podscope-test/cni"
    if [[ -n ${CRUN_1_27:-} ]]; then install_runtimes; fi
}

# crun 1.27.1 as the handler crun-userns, beside the defaults (a
# [runtimes.X] table replaces them whole, so they are listed too). Dotted
# keys, no table headers: a key a test appends (tests/load does) stays
# top-level. Written over make install's, kept as $HARNESS_CONFIG.
install_runtimes() {
    local config
    config=$(cat <<EOF
# Written by tests/harness/harness.sh (CRUN_1_27=): Debian's crun and runc
# as by default (crun the default handler), and crun 1.27.1 as crun-userns.
default_runtime = "crun"
runtimes.crun = { path = "/usr/bin/crun" }
runtimes.runc = { path = "/usr/bin/runc" }
runtimes.crun-userns = { path = "$CRUN_1_27_INSIDE", kind = "crun", root = "/run/crun-userns" }
EOF
)
    inside sh -c 'cat > "$1" && install -D -m 0644 "$1" "$2"' sh /etc/podscope/podscope.toml "$HARNESS_CONFIG" \
        <<<"$config" || fail "writing /etc/podscope/podscope.toml failed"
    local version
    version=$(inside "$CRUN_1_27_INSIDE" --version 2>&1 | head -n1) || true
    [[ $version == "crun version 1.27."* ]] \
        || fail "$CRUN_1_27_INSIDE (CRUN_1_27=$CRUN_1_27) inside the harness is not crun 1.27: ${version:-no output}"
    # podscoped may run already (activated on the bus): on the new config.
    inside sh -c 'systemctl reset-failed podscoped 2>/dev/null; systemctl try-restart podscoped' \
        || fail "podscoped did not restart on the harness's podscope.toml"
    say "runtime handler crun-userns: crun 1.27.1 at $CRUN_1_27_INSIDE (podscope.toml: crun, runc, crun-userns)"
}

# The pod network for tests and the demo: real plugins from Debian's
# containernetworking-plugins, on a bridge inside the harness's own network
# namespace (never the machine's).
install_cni_network() {
    inside sh -c "mkdir -p /etc/cni/net.d && rm -f /etc/cni/net.d/* && \
        cp '$REPO/tests/harness/cni/10-podscope-test.conflist' /etc/cni/net.d/"
    say "CNI network podscope-test in /etc/cni/net.d"
}

# The image registries and test images (tests/harness/registry/start.sh):
# registries.conf mirrors, docker-registry on 127.0.0.1:5000 and :5001.
install_registries() {
    local t0=$SECONDS
    inside "$REPO/tests/harness/registry/start.sh" > "$WORK/registry.log" 2>&1 \
        || { cat "$WORK/registry.log" >&2; fail "starting the test registries failed"; }
    say "test registries on 127.0.0.1:5000, :5001 (htpasswd) and :5005 (tokens), images pushed ($((SECONDS - t0)) s)"
}

shutdown() {
    [[ -n $SYSTEMD_PID ]] || return 0
    if kill -0 "$SYSTEMD_PID" 2>/dev/null; then
        inside systemctl poweroff --no-block >/dev/null 2>&1 || true
        for _ in $(seq 150); do
            kill -0 "$UNSHARE_PID" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$UNSHARE_PID" 2>/dev/null; then
            say "systemd did not power off in 30 s; killing its PID namespace"
            kill -9 "$SYSTEMD_PID" 2>/dev/null || true
        fi
    fi
    wait "$UNSHARE_PID" 2>/dev/null || true
    # Empty cgroup directories stay behind; remove only those we created.
    if [[ -n ${HARNESS_NODE:-} ]]; then
        remove_node_cgroups
    else
        cgroup_dirs > "$WORK/cgroups.after"
        comm -13 "$WORK/cgroups.before" "$WORK/cgroups.after" | sort -r | while read -r d; do
            rmdir "$d" 2>/dev/null || true
        done
    fi
    SYSTEMD_PID=
}

cleanup() {
    local rc=$?
    shutdown || true
    [[ -n ${KEEP_HARNESS_LOG:-} ]] || rm -rf "$WORK"
    exit "$rc"
}

case ${1:-} in
    run|run-bare)
        mode=$1
        shift
        [[ $# -gt 0 ]] || fail "usage: harness.sh $mode CMD [ARGS...]"
        trap cleanup EXIT
        trap 'exit 130' INT TERM
        resolve_tools
        boot
        if [[ $mode == run ]]; then install_project; fi
        install_cni_network
        if [[ $mode == run ]]; then install_registries; fi
        set +e
        inside env -C "$REPO" "${TOOL_ENV[@]}" "$@"
        rc=$?
        set -e
        if [[ $rc -ne 0 ]]; then
            say "command failed ($rc); podscoped's journal:"
            inside journalctl -u podscoped --no-pager -n 60 >&2 || true
        fi
        exit "$rc"
        ;;
    serve)
        mode=run
        ready=${2:?usage: harness.sh serve READY_FILE}
        trap cleanup EXIT
        trap 'exit 0' TERM
        trap 'exit 130' INT
        resolve_tools
        boot
        install_project
        install_registries
        echo "$SYSTEMD_PID" > "$ready.part" && mv "$ready.part" "$ready"
        # Until told to stop (TERM, then cleanup shuts systemd down), or
        # until systemd exits on its own.
        while kill -0 "$SYSTEMD_PID" 2>/dev/null; do sleep 1; done
        fail "systemd${HARNESS_NODE:+ of node $HARNESS_NODE} exited"
        ;;
    *)
        echo "usage: harness.sh run|run-bare CMD [ARGS...] | serve READY_FILE" >&2
        exit 2
        ;;
esac
