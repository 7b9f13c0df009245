#!/bin/bash
# Inside a node of make cluster (a harness booted by harness.sh serve with
# HARNESS_NODE): its pod network and its kubelet, joined to the cluster.
#
#   node.sh start NAME NODE_IP POD_CIDR [OTHER_POD_CIDR=VIA ...]
#       CNI: a bridge with POD_CIDR (host-local leases), no masquerade, so a
#       pod's address is what the other nodes' pods see; forwarding on; a
#       route to each other node's pods through that node. Then kubelet
#       1.36 (tests/e2e/kubelet.sh) with the node's kubeconfig; returns
#       once it answers /healthz.
#   node.sh containerd NAME NODE_IP
#       make bench's other side: kubelet stopped (its pods removed), podscope
#       stopped, containerd 2.3.4 started as the bench's anchor
#       (tests/harness/anchor/containerd.sh, CONTAINERD_2_3), and kubelet
#       started again on it, the same node to the API server.
#   node.sh stop
#       kubelet stopped and its pods removed through the CRI.
#
# Environment: STATE (run-cluster.sh's: kubelet-NAME.kubeconfig, pki/ca.crt),
# KUBELET_1_36 (harness.sh's path of it inside).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
say() { echo "node $(hostname): $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

start() {
    local name=${1:?} ip=${2:?} cidr=${3:?}
    shift 3
    : "${STATE:?}" "${KUBELET_1_36:?}"
    mkdir -p /etc/cni/net.d
    rm -f /etc/cni/net.d/*
    # No loopback plugin: podscope brings each pod's lo up as it makes the
    # namespace, and containerd (bench) runs a loopback network of its own.
    cat > /etc/cni/net.d/10-podscope-cluster.conflist <<EOF
{
  "cniVersion": "1.0.0",
  "name": "podscope-cluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$cidr" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
    sysctl -qw net.ipv4.ip_forward=1
    local route
    for route in "$@"; do
        ip route replace "${route%=*}" via "${route#*=}" || fail "route $route"
    done
    # crictl as an operator has it: podscope's socket for both services.
    printf 'runtime-endpoint: unix:///run/podscope/cri.sock\nimage-endpoint: unix:///run/podscope/cri.sock\ntimeout: 30\n' \
        > /etc/crictl.yaml
    # kubelet's pod files (/etc/hosts, volumes) on a file system of their
    # own, as on a node (ext4, xfs): the harness's overlay root cannot be
    # idmapped, which a hostUsers: false pod's binds are.
    mkdir -p /var/lib/kubelet
    mountpoint -q /var/lib/kubelet || mount -t tmpfs -o mode=0700 tmpfs /var/lib/kubelet
    install -D -m 0600 "$STATE/kubelet-$name.kubeconfig" /etc/kubernetes/kubelet.kubeconfig
    install -D -m 0644 "$STATE/pki/ca.crt" /etc/kubernetes/pki/ca.crt
    kubelet "$name" "$ip"
}

# kubelet NAME NODE_IP [ENDPOINT]: kubelet 1.36 joined as NAME.
kubelet() {
    KUBELET=$KUBELET_1_36 KUBELET_KUBECONFIG=/etc/kubernetes/kubelet.kubeconfig NODE_NAME=$1 NODE_IP=$2 \
        CLIENT_CA=/etc/kubernetes/pki/ca.crt "$REPO/tests/e2e/kubelet.sh" start ${3:+"$3"}
}

containerd() {
    local name=${1:?} ip=${2:?}
    : "${CONTAINERD_2_3:?CONTAINERD_2_3 names the directory of containerd 2.3.4}"
    KUBELET=$KUBELET_1_36 "$REPO/tests/e2e/kubelet.sh" stop
    systemctl stop podscope-cri.socket podscope-cri.service podscoped.service
    CONTAINERD=$CONTAINERD_2_3/containerd "$REPO/tests/harness/anchor/containerd.sh" start
    eval "$("$REPO/tests/harness/anchor/containerd.sh" env)"
    kubelet "$name" "$ip" "$ANCHOR_ENDPOINT"
}

case ${1:-} in
    start) shift; start "$@" ;;
    containerd) shift; containerd "$@" ;;
    stop) KUBELET=${KUBELET_1_36:-} "$REPO/tests/e2e/kubelet.sh" stop ;;
    *) echo "usage: node.sh start NAME NODE_IP POD_CIDR [CIDR=VIA ...] | containerd NAME NODE_IP | stop" >&2; exit 2 ;;
esac
