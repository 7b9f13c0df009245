#!/bin/bash
# A real kubelet (Kubernetes 1.26 or 1.36, standalone: static pods, no API server)
# as a unit of the harness's systemd, driving a CRI runtime: podscope by
# default, or the bench's anchor. Runs inside the harness.
#
#   kubelet.sh start [ENDPOINT]   start kubelet.service on ENDPOINT (default
#                                 podscope's socket); returns once kubelet
#                                 answers /healthz and /pods
#   kubelet.sh restart            systemctl restart kubelet; returns once it
#                                 answers again
#   kubelet.sh regate             stop kubelet and start it again on the same
#                                 endpoint with FEATURE_GATES (its pods keep
#                                 running); returns once it answers
#   kubelet.sh stop               stop it, remove every pod it left through
#                                 the CRI, its slices and its files
#   kubelet.sh env                print what the tests read (ports, paths)
#
#   KUBELET         the kubelet binary (harness.sh binds KUBELET= in at
#                   $TOOLS/kubelet; default ../shared/tools/kubelet)
#   FEATURE_GATES   kubelet feature gates, e.g. EventedPLEG=true (bench)
#   KUBELET_ANONYMOUS=true  anonymous requests on the authenticated port
#                   (10250, loopback only), allowed everything: make node's
#                   checkpoint API case (POST /checkpoint/...)
#
# A node of a cluster (make cluster, tests/cluster/node.sh) instead, when
# KUBELET_KUBECONFIG names its credentials towards the API server:
#   KUBELET_KUBECONFIG  the node's kubeconfig (system:node:NODE_NAME)
#   NODE_NAME       the Node's name
#   NODE_IP         its InternalIP, where the API server reaches kubelet
#   CLIENT_CA       the CA of the API server's client certificate
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
UNIT=kubelet
ROOT=/var/lib/kubelet
CONF=/etc/kubernetes
MANIFESTS=$CONF/manifests
RO_PORT=10255
HEALTHZ_PORT=10248
PODSCOPE=unix:///run/podscope/cri.sock
if [[ -z ${KUBELET:-} ]]; then
    KUBELET=$REPO/../shared/tools/kubelet
    [[ -x /usr/local/lib/podscope-test/bin/kubelet ]] && KUBELET=/usr/local/lib/podscope-test/bin/kubelet
fi
if [[ -z ${CRICTL:-} ]]; then
    CRICTL=$REPO/../shared/tools/crictl
    [[ -x /usr/local/lib/podscope-test/bin/crictl ]] && CRICTL=/usr/local/lib/podscope-test/bin/crictl
fi
STATE=/run/kubelet-e2e

say() { echo "kubelet.sh: $*" >&2; }
fail() {
    say "FAILED: $*"
    exit 1
}

# The authenticated port (10250) and who may use it.
access_config() {
    if [[ -n ${KUBELET_KUBECONFIG:-} ]]; then
        cat <<YAML
# The API server comes to the node's address for exec, attach,
# port-forward and logs, with a client certificate of the cluster's CA;
# what it may do there it is asked (Webhook), as kubeadm's nodes do.
address: 0.0.0.0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $CLIENT_CA
authorization:
  mode: Webhook
YAML
    else
        cat <<YAML
# kubelet's own view for the tests: /pods, /stats/summary and /metrics,
# unauthenticated, on loopback only (the harness has a network of its own).
address: 127.0.0.1
# No API server to ask: the authenticated port (10250, a self-signed
# certificate) has no client CA, no anonymous access and no token webhook,
# so it lets nobody in; authorization's default (Webhook) would need an API
# server, and kubelet refuses to start without one.
authentication:
  anonymous:
    enabled: ${KUBELET_ANONYMOUS:-false}
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
YAML
    fi
}

# How big a container's log file grows before kubelet rotates it.
log_config() {
    if [[ -n ${KUBELET_KUBECONFIG:-} ]]; then
        cat <<YAML
# A container's 100 MiB in one file: make bench's cluster section reads
# them back with kubectl logs, which reads the current file only.
containerLogMaxSize: 200Mi
YAML
    else
        cat <<YAML
# Small logs, so that kubelet rotates them (ReopenContainerLog) within the
# test; enough files that no rotated line is deleted before it is read.
containerLogMaxSize: 8Ki
containerLogMaxFiles: 10
YAML
    fi
}

write_config() {
    mkdir -p "$CONF" "$MANIFESTS" "$STATE/sysctl"
    cat > "$CONF/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Pods and their QoS classes are systemd slices (kubepods.slice ->
# kubepods-<qos>.slice -> kubepods-<qos>-pod<uid>.slice), as podscope's
# units are systemd's: the driver every systemd node uses.
cgroupDriver: systemd
# Standalone: the pods are the manifests in this directory.
staticPodPath: $MANIFESTS
readOnlyPort: $RO_PORT
healthzBindAddress: 127.0.0.1
healthzPort: $HEALTHZ_PORT
$(access_config)
# A test machine may have swap on; kubelet 1.26 refuses to start with it
# unless told.
failSwapOn: false
$(log_config)
# A CI machine's disk may be fuller than kubelet's defaults allow (10% free
# for the node's filesystem, 15% for the images'): a test node must not
# refuse or evict its pods for that.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
YAML
    # kubelet 1.35 and later refuse a cgroup v1 host (the harness's v1
    # hybrid) unless told (KEP-5573); on a cgroup v2 node nothing is needed.
    local minor
    minor=$("$KUBELET" --version | sed -n 's/^Kubernetes v1\.\([0-9]*\)\..*/\1/p')
    if [[ $(stat -f -c %T /sys/fs/cgroup) != cgroup2fs ]] && ((${minor:-0} >= 35)); then
        echo "failCgroupV1: false" >> "$CONF/kubelet.yaml"
    fi
    # kubelet sets vm.overcommit_memory, kernel.panic and kernel.panic_on_oops
    # (and checks three more) at start: these are the machine's own, not the
    # harness's, so kubelet is shown its expected values instead of changing
    # them for every process on the machine.
    local kv
    SYSCTL_BINDS=()
    for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
        kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
        local f=$STATE/sysctl/${kv%%=*}
        mkdir -p "${f%/*}"
        echo "${kv#*=}" > "$f"
        SYSCTL_BINDS+=("--property=BindReadOnlyPaths=$f:/proc/sys/${kv%%=*}")
    done
}

start() {
    local endpoint=${1:-$PODSCOPE}
    [[ $EUID -eq 0 ]] || fail "must run as root"
    [[ -x $KUBELET ]] || fail "kubelet not found at $KUBELET (set KUBELET=)"
    # A systemd that booted this system or namespace (sd_booted's test; a
    # booted node's suite runs while the boot is still "starting").
    [[ -d /run/systemd/system ]] && systemctl show -P Version >/dev/null 2>&1 \
        || fail "no running systemd: run inside the harness (tests/harness/harness.sh run ...)"
    systemctl is-active --quiet "$UNIT" && fail "$UNIT is already running (kubelet.sh stop first)"
    write_config
    mkdir -p "$ROOT" /var/log/pods
    run_unit "$endpoint"
}

# kubelet.service with the config written and FEATURE_GATES, on ENDPOINT.
run_unit() {
    local endpoint=$1
    local gates=()
    [[ -n ${FEATURE_GATES:-} ]] && gates=("--feature-gates=$FEATURE_GATES")
    systemctl reset-failed "$UNIT" 2>/dev/null || true
    echo "$endpoint" > "$STATE/endpoint"
    local node=(--hostname-override=e2e-node)
    if [[ -n ${KUBELET_KUBECONFIG:-} ]]; then
        : "${NODE_NAME:?}" "${NODE_IP:?}" "${CLIENT_CA:?}"
        node=(--kubeconfig="$KUBELET_KUBECONFIG" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP")
    fi
    # As a distribution's kubelet.service runs it (kubeadm's: restarted
    # whenever it exits), with the flags that 1.26 has no config field for.
    systemd-run --quiet --unit="$UNIT" --description="kubelet (podscope e2e)" \
        --property=Restart=always --property=RestartSec=1 \
        "${SYSCTL_BINDS[@]}" \
        "$KUBELET" --config="$CONF/kubelet.yaml" \
        --container-runtime-endpoint="$endpoint" --image-service-endpoint="$endpoint" \
        --root-dir="$ROOT" "${node[@]}" \
        "${gates[@]}" --v=2 \
        || fail "kubelet did not start"
    wait_healthy
    say "kubelet $("$KUBELET" --version | awk '{print $2}') on $endpoint"
}

wait_healthy() {
    local _
    for _ in $(seq 300); do
        if curl -sf "http://127.0.0.1:$HEALTHZ_PORT/healthz" >/dev/null 2>&1 &&
            curl -sf "http://127.0.0.1:$RO_PORT/pods" >/dev/null 2>&1; then
            return 0
        fi
        # (activating: between a failed kubelet and its restart, as its
        # unit's Restart=always has it.)
        [[ $(systemctl show -P ActiveState "$UNIT") =~ ^(active|activating)$ ]] || break
        sleep 0.2
    done
    journalctl -u "$UNIT" --no-pager -n 60 >&2
    fail "kubelet did not become healthy"
}

restart() {
    systemctl is-active --quiet "$UNIT" || fail "$UNIT is not running"
    systemctl restart "$UNIT"
    wait_healthy
}

# The same kubelet with other feature gates: a unit's command line is
# fixed, so the unit is made again; no pod is touched.
regate() {
    systemctl is-active --quiet "$UNIT" || fail "$UNIT is not running"
    systemctl stop "$UNIT"
    systemctl reset-failed "$UNIT" 2>/dev/null || true
    write_config
    run_unit "$(cat "$STATE/endpoint")"
}

# Remove every pod and container through the CRI, as a node drained would.
drain() {
    local endpoint=$1 _
    [[ -x $CRICTL ]] || fail "crictl not found at $CRICTL (set CRICTL=)"
    local c=("$CRICTL" --runtime-endpoint "$endpoint" --image-endpoint "$endpoint" --timeout 60s)
    for _ in $(seq 10); do
        "${c[@]}" rmp --all --force >/dev/null 2>&1 || true
        [[ -z $("${c[@]}" pods -q 2>/dev/null) ]] && return 0
        sleep 0.5
    done
    say "WARNING: pods left after 10 rounds of removal: $("${c[@]}" pods -q | xargs)"
}

stop() {
    systemctl stop "$UNIT" 2>/dev/null || true
    systemctl reset-failed "$UNIT" 2>/dev/null || true
    [[ -f $STATE/endpoint ]] && drain "$(cat "$STATE/endpoint")"
    # kubelet's slices stay active when it stops; empty now, they go.
    local slice
    for slice in $(systemctl list-units --plain --no-legend 'kubepods*.slice' | awk '{print $1}' | sort -r); do
        systemctl stop "$slice" 2>/dev/null || true
    done
    findmnt -rn -o TARGET | awk -v d="$ROOT/" 'index($0, d) == 1' | sort -r | xargs -r umount -l
    rm -rf "$MANIFESTS" "$STATE" "$CONF/kubelet.yaml"
    # (A cluster's node has its root on a file system of its own.)
    if mountpoint -q "$ROOT"; then
        find "$ROOT" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
    else
        rm -rf "$ROOT"
    fi
}

case ${1:-} in
    start) shift; start "$@" ;;
    restart) restart ;;
    regate) regate ;;
    stop) stop ;;
    env)
        echo "KUBELET_RO=http://127.0.0.1:$RO_PORT"
        echo "KUBELET_MANIFESTS=$MANIFESTS"
        ;;
    *)
        echo "usage: kubelet.sh start [ENDPOINT]|restart|regate|stop|env" >&2
        exit 2
        ;;
esac
