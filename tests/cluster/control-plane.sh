#!/bin/bash
# make cluster's control plane: etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler (Kubernetes 1.36), as processes in the cluster's network
# namespace, on its bridge's address; certificates from a CA of the run's
# own making (openssl); a kubeconfig for the admin and one per node.
#
#   control-plane.sh start NODE...   certificates, kubeconfigs, the four
#                                    daemons; returns once each answers
#   control-plane.sh stop            TERM each (KILL after 20 s), in reverse
#
# Environment (run-cluster.sh sets it): K8S (the binaries), KUBECTL, STATE
# (certificates, kubeconfigs, pid files; etcd's data on a tmpfs in it),
# LOGS, NETNS (the network namespace), API_ADDRESS (the bridge's address),
# SERVICE_CIDR.
set -euo pipefail
: "${K8S:?}" "${KUBECTL:?}" "${STATE:?}" "${LOGS:?}" "${NETNS:?}" "${API_ADDRESS:?}" "${SERVICE_CIDR:?}"
PKI=$STATE/pki
PIDS=$STATE/pids
ETCD_URL=http://127.0.0.1:2379
API_URL=https://$API_ADDRESS:6443
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler)

say() { echo "control-plane: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
in_netns() { ip netns exec "$NETNS" "$@"; }

# cert NAME SUBJECT EXTENSIONS: an EC key and a certificate for NAME signed
# by the run's CA (EC keys: each is made in milliseconds, RSA's in tenths
# of a second, and a run makes a dozen).
cert() {
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$PKI/$1.key" -subj "$2" -out "$PKI/$1.csr" 2>/dev/null
    openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
        -days 2 -sha256 -extfile <(printf '%s\n' "$3") -out "$PKI/$1.crt" 2>"$PKI/$1.err" \
        || fail "openssl could not sign $1's certificate: $(cat "$PKI/$1.err")"
    rm -f "$PKI/$1.csr" "$PKI/$1.err"
}

CLIENT='basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth'

certificates() {
    local node
    rm -rf "$PKI" && mkdir -p "$PKI" && chmod 700 "$PKI"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -sha256 \
        -subj /CN=podscope-cluster-ca -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null \
        || fail "openssl could not make the CA"
    cert apiserver /CN=kube-apiserver "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$API_ADDRESS,IP:127.0.0.1,IP:${SERVICE_CIDR%.*}.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    # The API server's client certificate towards kubelets (exec, logs,
    # port-forward, attach): kubelet's webhook authorizer asks the API
    # server, which grants system:masters everything.
    cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$CLIENT"
    cert admin "/O=system:masters/CN=kubernetes-admin" "$CLIENT"
    cert controller-manager /CN=system:kube-controller-manager "$CLIENT"
    cert scheduler /CN=system:kube-scheduler "$CLIENT"
    # Each kubelet as the Node authorizer knows nodes: system:node:NAME in
    # system:nodes (what a bootstrap token's CSR would have been signed as).
    for node in "$@"; do
        cert "kubelet-$node" "/O=system:nodes/CN=system:node:$node" "$CLIENT"
    done
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
    openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
}

# kubeconfig NAME CERT: $STATE/NAME.kubeconfig, the certificates embedded
# (a node's is copied into its harness).
kubeconfig() {
    local kc=$STATE/$1.kubeconfig
    rm -f "$kc"
    "$KUBECTL" config set-cluster podscope --server="$API_URL" --certificate-authority="$PKI/ca.crt" \
        --embed-certs=true --kubeconfig="$kc" >/dev/null
    "$KUBECTL" config set-credentials "$1" --client-certificate="$PKI/$2.crt" \
        --client-key="$PKI/$2.key" --embed-certs=true --kubeconfig="$kc" >/dev/null
    "$KUBECTL" config set-context podscope --cluster=podscope --user="$1" --kubeconfig="$kc" >/dev/null
    "$KUBECTL" config use-context podscope --kubeconfig="$kc" >/dev/null
}

# launch NAME ARGS...: K8S/NAME in the namespace, its output in LOGS/NAME.log,
# its PID in PIDS/NAME.pid. The subshell execs ip, which execs the daemon:
# the PID is the daemon's. Without the harness's lock (fd 9, which
# run-cluster.sh holds), so that a daemon left behind cannot hold it.
launch() {
    local name=$1
    shift
    [[ -x $K8S/$name ]] || fail "$K8S/$name not found"
    (exec ip netns exec "$NETNS" "$K8S/$name" "$@") > "$LOGS/$name.log" 2>&1 9>&- &
    echo $! > "$PIDS/$name.pid"
}

# wait_for WHAT SECONDS CMD...: CMD (in the namespace) until it succeeds.
wait_for() {
    local what=$1 secs=$2 name=$3
    shift 3
    local end=$((SECONDS + secs))
    until in_netns "$@" >/dev/null 2>&1; do
        kill -0 "$(cat "$PIDS/$name.pid")" 2>/dev/null \
            || { tail -n 30 "$LOGS/$name.log" >&2; fail "$name exited (log: $LOGS/$name.log)"; }
        ((SECONDS < end)) || { tail -n 30 "$LOGS/$name.log" >&2; fail "$what did not answer within $secs s"; }
        sleep 0.2
    done
}

start() {
    (($# > 0)) || fail "usage: control-plane.sh start NODE..."
    mkdir -p "$STATE" "$LOGS" "$PIDS"
    certificates "$@"
    kubeconfig admin admin
    kubeconfig controller-manager controller-manager
    kubeconfig scheduler scheduler
    local node
    for node in "$@"; do kubeconfig "kubelet-$node" "kubelet-$node"; done

    # etcd's data on a tmpfs: the cluster lives for one run, and a busy
    # disk's fsyncs would be etcd's (and every write's) latency.
    mkdir -p "$STATE/etcd"
    mountpoint -q "$STATE/etcd" || mount -t tmpfs -o mode=700 tmpfs "$STATE/etcd"
    launch etcd --name=podscope-cluster --data-dir="$STATE/etcd/data" \
        --listen-client-urls="$ETCD_URL" --advertise-client-urls="$ETCD_URL" \
        --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380
    wait_for etcd 60 etcd curl -sf "$ETCD_URL/health"

    # The nodes reach it on the bridge; it reaches kubelets by their
    # InternalIP (the bridge's network), never by a host name.
    launch kube-apiserver --etcd-servers="$ETCD_URL" --service-cluster-ip-range="$SERVICE_CIDR" \
        --bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$API_ADDRESS" \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
        --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" \
        --tls-private-key-file="$PKI/apiserver.key" \
        --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
        --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
        --kubelet-preferred-address-types=InternalIP \
        --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
        --allow-privileged=true
    wait_for "the API server's /readyz" 120 kube-apiserver \
        "$KUBECTL" --kubeconfig="$STATE/admin.kubeconfig" get --raw /readyz

    launch kube-controller-manager --kubeconfig="$STATE/controller-manager.kubeconfig" \
        --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" \
        --use-service-account-credentials --leader-elect=false --bind-address=127.0.0.1 \
        --service-cluster-ip-range="$SERVICE_CIDR"
    launch kube-scheduler --kubeconfig="$STATE/scheduler.kubeconfig" --leader-elect=false \
        --bind-address=127.0.0.1
    wait_for kube-controller-manager 60 kube-controller-manager curl -skf https://127.0.0.1:10257/healthz
    wait_for kube-scheduler 60 kube-scheduler curl -skf https://127.0.0.1:10259/healthz
}

stop() {
    local i name pid
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
        name=${DAEMONS[i]}
        [[ -f $PIDS/$name.pid ]] || continue
        pid=$(cat "$PIDS/$name.pid")
        if kill -TERM "$pid" 2>/dev/null; then
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -0 "$pid" 2>/dev/null && { say "$name ($pid) ignored TERM for 20 s"; kill -KILL "$pid"; }
        fi
        rm -f "$PIDS/$name.pid"
    done
    if mountpoint -q "$STATE/etcd"; then umount "$STATE/etcd"; fi
}

case ${1:-} in
    start) shift; start "$@" ;;
    stop) stop ;;
    *) echo "usage: control-plane.sh start NODE... | stop" >&2; exit 2 ;;
esac
