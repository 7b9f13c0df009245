#!/bin/bash
# The podscope demo, run inside the harness by `make demo`: a pod created,
# started, inspected with the systemd tools; a container run in it as a
# systemd unit of its own (no shim), its logs and an exec; the pod stopped
# and removed with its container; an image pulled through a registry
# mirror, listed and removed; then the same through crictl; then a real
# kubelet running a static pod on it.
set -euo pipefail
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "The daemon is D-Bus activated by the first call"
run podscopectl info

step "Create and start a pod (podscopectl talks D-Bus to podscoped)"
printf '$ podscopectl create web-0 --namespace demo --hostname web-0 --label app=web --memory 268435456 --port 8080:80 --dns-server 10.96.0.10 --log-directory /var/log/pods/demo_web-0 --start\n'
id=$(podscopectl create web-0 --namespace demo --hostname web-0 --label app=web --memory 268435456 --port 8080:80 --dns-server 10.96.0.10 --log-directory /var/log/pods/demo_web-0 --start)
echo "$id"

step "podscopectl list / status"
run podscopectl list
run podscopectl status "${id:0:12}"

step "The pod is a transient systemd scope holding one podscope-init, bound to its netns unit"
run systemctl list-units --no-pager 'podscope-*'
run systemctl status --no-pager --lines=0 "podscope-$id.scope"
run systemctl show -p MemoryMax -p Slice -p Delegate -p BindsTo "podscope-$id.scope"
run ip netns list

step "Its network was set up by the CNI plugins in /etc/cni/net.d before it started"
run ip -n "podscope-$id" -brief addr show
run cat "/run/podscope/sandboxes/$id/resolv.conf"
run sh -c "iptables-save -t nat | grep -e 'dport 8080'"

step "...and a machine for systemd-machined (with its address)"
run machinectl list --no-pager
run machinectl status --no-pager demo-web-0

step "...and a D-Bus object"
run busctl tree org.podscope.Sandbox1
run busctl introspect org.podscope.Sandbox1 "/org/podscope/Sandbox1/sandbox/$id" org.podscope.Sandbox1.Sandbox
run busctl get-property org.podscope.Sandbox1 "/org/podscope/Sandbox1/sandbox/$id" org.podscope.Sandbox1.Sandbox State
run busctl get-property org.podscope.Sandbox1 "/org/podscope/Sandbox1/sandbox/$id" org.podscope.Sandbox1.Sandbox IPs

step "The journal has the pod's events, with structured fields"
run journalctl -u podscoped --no-pager -o cat SANDBOX_ID="$id"

step "A container in the pod: an image pulled, then a transient service of its own in the pod's slice"
run podscopectl pull busybox
printf '%s\n' "$ podscopectl container create $id web busybox --log-path web/0.log --memory 67108864 --start -- sh -c 'echo hello from a container; while true; do date; sleep 1; done'"
ctr=$(podscopectl container create "$id" web busybox --log-path web/0.log --memory 67108864 --start -- \
    sh -c 'echo hello from a container; while true; do date; sleep 1; done')
echo "$ctr"
run podscopectl ps
run systemctl status --no-pager --lines=0 "podscope-ctr-$ctr.service"
run systemctl show -p MainPID -p Slice -p MemoryMax -p DevicePolicy -p OOMPolicy "podscope-ctr-$ctr.service"

step "The pod is its slice: one podscope-init and the container's own process, no shim or monitor"
slice=$(systemctl show -P Slice "podscope-$id.scope")
run systemd-cgls --no-pager -u "$slice"

step "Its output, in the CRI log file kubelet reads; a command run inside it"
sleep 2
run podscopectl logs "$ctr"
run head -n 3 /var/log/pods/demo_web-0/web/0.log
run podscopectl exec "$ctr" sh -c 'hostname; id; cat /proc/1/cmdline | tr "\0" " "; echo'
run sh -c "journalctl -u podscoped --no-pager -o cat EVENT=container-started | tail -n 1"

step "Change its memory limit while it runs"
run podscopectl update "$id" --memory 536870912
run systemctl show -p MemoryMax "podscope-$id.scope"

step "Stop the pod (its container first), then remove both"
run podscopectl stop "$id"
run podscopectl ps -a
run podscopectl status "${id:0:12}"
run podscopectl rm "$id"
run podscopectl list
run systemctl list-units --no-pager --no-legend 'podscope-*'

step "Images: pulled through the registry mirror registries.conf names (here the harness's)"
run grep -A3 'prefix = "docker.io"' /etc/containers/registries.conf
run podscopectl images
run sh -c "podscopectl inspecti busybox | head -n 12"
run sh -c "journalctl -u podscoped --no-pager -o cat EVENT=image-pulled | tail -n 1"
run podscopectl rmi busybox

if [[ -x ${CRICTL:-} ]]; then
    step "kubelet's view: the CRI frontend, driven by crictl (grpc-go, as kubelet)"
    crictl() { "$CRICTL" --runtime-endpoint unix:///run/podscope/cri.sock --image-endpoint unix:///run/podscope/cri.sock "$@"; }
    run crictl version
    run crictl pull registry.k8s.io/e2e-test-images/busybox:1.29-2
    run crictl images
    printf '$ crictl runp tests/conformance/pod-network.json\n'
    pod=$(crictl runp tests/conformance/pod-network.json)
    echo "$pod"
    run crictl pods
    printf '$ crictl create %s tests/conformance/container.json tests/conformance/pod-network.json\n' "$pod"
    c=$(crictl create "$pod" tests/conformance/container.json tests/conformance/pod-network.json)
    echo "$c"
    run crictl start "$c"
    run crictl ps
    run crictl exec -s "$c" echo hello from crictl exec
    run crictl stats
    run crictl stop "$c"
    run crictl logs "$c"
    run crictl stopp "$pod"
    run crictl rmp "$pod"
else
    echo
    echo "(crictl not found at '${CRICTL:-}': set CRICTL=/path/to/crictl to see the CRI part)"
fi

if [[ -x ${CRICTL:-} && -x ${KUBELET:-} ]]; then
    step "A real kubelet runs a static pod on podscope (tests/e2e/kubelet.sh: cgroup driver systemd)"
    run tests/e2e/kubelet.sh start
    cat > /etc/kubernetes/manifests/hello.yaml <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: hello
  namespace: demo
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/busybox:1.29-2
    command: ["sh", "-c", "echo hello from a static pod > /index.html; exec httpd -f -p 8080 -h /"]
    readinessProbe:
      httpGet: {port: 8080}
      periodSeconds: 1
    resources:
      limits: {memory: 64Mi, cpu: 250m}
YAML
    run cat /etc/kubernetes/manifests/hello.yaml
    for _ in $(seq 300); do
        curl -s localhost:10255/pods | jq -e '.items[]? | select(.metadata.name == "hello-e2e-node")
            | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))' >/dev/null && break
        sleep 0.1
    done
    printf '$ curl -s localhost:10255/pods | jq ...   # kubelet'"'"'s own view\n'
    curl -s localhost:10255/pods | jq -c '.items[] | {name: .metadata.name, phase: .status.phase, podIP: .status.podIP,
        containers: [.status.containerStatuses[] | {name, ready, image, containerID}]}'
    ip=$(curl -s localhost:10255/pods | jq -r '.items[] | select(.metadata.name == "hello-e2e-node") | .status.podIP')
    run curl -s "http://$ip:8080/index.html"
    run crictl pods --namespace demo
    # (kubelet rewrites its slices' drop-ins; systemctl's warning about it
    # is left out)
    printf '$ systemctl status --no-pager --lines=0 kubepods.slice\n'
    systemctl status --no-pager --lines=0 kubepods.slice 2>/dev/null
    run sh -c "systemctl show -p MemoryMax -p CPUQuotaPerSecUSec -p Slice \$(systemctl list-units --plain --no-legend 'podscope-ctr-*' | awk '{print \$1}')"
    run rm /etc/kubernetes/manifests/hello.yaml
    run tests/e2e/kubelet.sh stop
else
    echo
    echo "(crictl or kubelet not found: set CRICTL= and KUBELET= to see kubelet run a static pod)"
fi
echo
echo "demo finished: a pod and its container were made, inspected with systemctl/busctl/journalctl, stopped and removed; an image was pulled, listed and removed; kubelet ran a static pod."
