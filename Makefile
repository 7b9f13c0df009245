# podscope — build, install, test, demo, benchmark.
#
#   make            build the installed processes (release; make bench builds the bench)
#   make install    install (honours DESTDIR, PREFIX, LIBEXECDIR, UNITDIR, ...)
#   make check      every test: fmt, clippy, unit tests, a short fuzzing pass,
#                   integration tests (a kill at every step among them) in a
#                   private systemd (tests/harness), installing what it needs,
#                   the adversarial suite (make isolation) in another,
#                   the packages built, installed, upgraded and purged there,
#                   then conformance, e2e (kubelet), load, cluster and node (a VM); each suite's time is printed, and
#                   again at the end with the total
#   make fuzz       the property-based fuzzers, long (FUZZ_CASES=)
#   make conformance  crictl and critest 1.29 and 1.36 (CRICTL=, CRITEST=,
#                   CRITEST_1_36_XZ=, CRICTL_1_36_XZ=) against the installed
#                   podscope-cri, in the harness; calls past their deadline
#                   (critest 1.36's timeout spec 20 times on busy cores);
#                   critest 1.36's user namespace specs again on the
#                   handler crun-userns (CRUN_1_27_XZ=)
#   make e2e        real kubelets, 1.26 and 1.36 (KUBELET=, KUBELET_1_36_XZ=),
#                   run static pods on podscope, in the harness
#   make load       a full node: 110 pods x 4 containers created and drained
#                   through the CRI by 8 clients, with daemon restarts, a
#                   bus bound of 4 and a low descriptor limit, in the harness
#   make cluster    a real cluster: Kubernetes 1.36's control plane and two
#                   podscope nodes (each a harness with kubelet 1.36),
#                   checked with kubectl (KUBECTL=) and on the nodes
#   make node       a real node: Debian 12 booted in a VM (systemd, cgroup
#                   v2), podscope's .deb installed with apt, the node suite
#   make demo       a pod created, inspected with systemctl/busctl, stopped, removed;
#                   a container; crictl; kubelet running a static pod
#   make bench      the performance table (BENCH= names sections, e.g.
#                   BENCH=kubelet-1.36; default all; see bench/src/main.rs)
#   make deb        target/deb/podscope_*.deb (packaging/debian), lintian-checked
#   make rpm        target/rpm/RPMS/*/podscope-*.rpm (packaging/rpm/podscope.spec)
#   make dist       target/podscope-VERSION.tar.gz, the committed tree (the
#                   spec's Source0)

# A directory the system's own packages name in their pkg-config files (so
# the daemons that read it find our files), else the usual default.
pkgvar = $(or $(shell pkg-config --variable=$(2) $(1) 2>/dev/null),$(3))

PREFIX      ?= /usr
BINDIR      ?= $(PREFIX)/bin
LIBEXECDIR  ?= $(PREFIX)/libexec
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
DOCDIR      ?= $(DATADIR)/doc/podscope
SYSCONFDIR  ?= /etc
UNITDIR     ?= $(call pkgvar,systemd,systemdsystemunitdir,/lib/systemd/system)
DBUSDIR     ?= $(call pkgvar,dbus-1,datadir,$(DATADIR))/dbus-1
POLKITDIR   ?= $(call pkgvar,polkit-gobject-1,actiondir,$(DATADIR)/polkit-1/actions)
BASHCOMPDIR ?= $(call pkgvar,bash-completion,completionsdir,$(DATADIR)/bash-completion/completions)
SYSUSERSDIR ?= $(call pkgvar,systemd,sysusersdir,/usr/lib/sysusers.d)
ZSHCOMPDIR  ?= $(DATADIR)/zsh/vendor-completions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d
PKGLIBEXEC  := $(LIBEXECDIR)/podscope
# Kubernetes' own CRI clients (grpc-go, as kubelet): the copies beside the
# project unless given. Every target that runs them takes them from here;
# the harness shows them inside at a fixed path, wherever they are.
CRICTL      ?= $(abspath ../shared/tools/crictl)
CRITEST     ?= $(abspath ../shared/tools/critest)
# A real kubelet (1.26, standalone) for make e2e and make bench.
KUBELET     ?= $(abspath ../shared/tools/kubelet)
# Kubernetes 1.36's critest, crictl and kubelet, xz-packed, for make
# conformance, e2e and node (both generations must pass); unpacked into
# target/tools/k8s-1.36 when the packed copy is newer.
KUBELET_1_36_XZ ?= $(abspath ../shared/tools/k8s-1.36/kubelet.xz)
CRITEST_1_36_XZ ?= $(abspath ../shared/tools/k8s-1.36/critest.xz)
CRICTL_1_36_XZ ?= $(abspath ../shared/tools/k8s-1.36/crictl.xz)
K8S_1_36 := $(abspath target/tools/k8s-1.36)
# $(call unxz,SRC,OUT,VAR): shell that unpacks SRC (xz) into OUT, an
# executable, unless OUT is newer; a missing SRC fails the target, naming
# the variable to set. Every tool the targets unpack goes through it.
unxz = { test -f "$(1)" || { echo "$@: $(1) not found (set $(3)=...)" >&2; exit 1; }; \
	if [ ! -x "$(2)" ] || [ "$(2)" -ot "$(1)" ]; then mkdir -p "$(dir $(2))" && \
	  xz -dc "$(1)" > "$(2).part" && chmod 0755 "$(2).part" && mv "$(2).part" "$(2)"; fi; }
# $(call unxz_tool,VAR,OUT): OUT unpacked from $(VAR).
unxz_tool = @$(call unxz,$($(1)),$(2),$(1))
# crun 1.27.1 (built for Debian 12), xz-packed: the harness's runtime
# handler crun-userns (Debian's crun 1.8.1 stays the default) for make
# conformance and integration; unpacked into target/tools/crun-1.27.
CRUN_1_27_XZ ?= $(abspath ../shared/tools/crun-1.27/crun.xz)
CRUN_1_27 := $(abspath target/tools/crun-1.27/crun)
# containerd 2.3.4 (with its runc shim), xz-packed, for make bench's
# full-node rows beside Debian's containerd 1.6; unpacked into target/.
CONTAINERD_2_3_XZ ?= $(abspath ../shared/tools/containerd-2.3)
CONTAINERD_2_3 := $(abspath target/tools/containerd-2.3)
# A missing crictl, critest or kubelet fails the target, before anything boots.
need_cri_tools = @for t in "$(CRICTL)" "$(CRITEST)"; do test -x "$$t" || { \
	  echo "$@: $$t not found or not executable (set CRICTL=... CRITEST=...)" >&2; exit 1; }; done
need_kubelet = @test -x "$(KUBELET)" || { \
	  echo "$@: $(KUBELET) not found or not executable (set KUBELET=...)" >&2; exit 1; }
TIMED       := tests/harness/timed.sh
CARGO       ?= cargo
RELEASE     := target/release
INSTALL     ?= install
VERSION     := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)

DAEMONS  := podscoped podscope-init podscope-netns podscope-cri
# Units that name a binary: installed with its real path substituted.
EXEC_UNITS := podscoped.service podscope-netns@.service podscope-cri.service
PLAIN_UNITS := podscope.slice podscope-cri.socket
MAN1 := man/podscopectl.1
MAN5 := man/podscope.toml.5
MAN8 := man/podscoped.8 man/podscope-cri.8

.PHONY: all build install uninstall deps deps-build dist check lint unit fuzz-short fuzz integration isolation packaging conformance e2e load cluster node demo bench deb rpm clean

all: build

# The installed processes only (the workspace's default members); make
# bench builds the bench, and the suites build their own drivers.
build:
	$(TIMED) build $(CARGO) build --release --locked --bins

install:
	@for b in podscopectl $(DAEMONS); do \
	  test -x $(RELEASE)/$$b || { echo "$(RELEASE)/$$b missing: run 'make' first" >&2; exit 1; }; done
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGLIBEXEC) $(DESTDIR)$(UNITDIR) \
	  $(DESTDIR)$(DBUSDIR)/system.d $(DESTDIR)$(DBUSDIR)/system-services $(DESTDIR)$(DBUSDIR)/interfaces \
	  $(DESTDIR)$(POLKITDIR) $(DESTDIR)$(SYSCONFDIR)/podscope $(DESTDIR)$(DOCDIR) \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
	  $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR) \
	  $(DESTDIR)$(SYSUSERSDIR)
	$(INSTALL) -m 0755 $(RELEASE)/podscopectl $(DESTDIR)$(BINDIR)/podscopectl
	$(INSTALL) -m 0755 $(addprefix $(RELEASE)/,$(DAEMONS)) $(DESTDIR)$(PKGLIBEXEC)/
	for u in $(EXEC_UNITS); do \
	  sed 's|/usr/libexec/podscope|$(PKGLIBEXEC)|g' units/$$u > $(DESTDIR)$(UNITDIR)/$$u && \
	  chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	$(INSTALL) -m 0644 $(addprefix units/,$(PLAIN_UNITS)) $(DESTDIR)$(UNITDIR)/
	$(INSTALL) -m 0644 dbus/org.podscope.Sandbox1.conf $(DESTDIR)$(DBUSDIR)/system.d/
	$(INSTALL) -m 0644 dbus/org.podscope.Sandbox1.service $(DESTDIR)$(DBUSDIR)/system-services/
	$(INSTALL) -m 0644 dbus/org.podscope.Sandbox1.xml $(DESTDIR)$(DBUSDIR)/interfaces/
	$(INSTALL) -m 0644 polkit/org.podscope.Sandbox1.policy $(DESTDIR)$(POLKITDIR)/
	$(INSTALL) -m 0644 packaging/podscope.sysusers $(DESTDIR)$(SYSUSERSDIR)/podscope.conf
	# Installed on this system (no DESTDIR): the group now; the packages
	# have their package managers make it.
	if [ -z "$(DESTDIR)" ] && command -v systemd-sysusers >/dev/null; then \
	  systemd-sysusers $(SYSUSERSDIR)/podscope.conf; fi
	# The config is the admin's once installed: never overwritten here (the
	# packages mark it as a conffile).
	test -e $(DESTDIR)$(SYSCONFDIR)/podscope/podscope.toml || \
	  $(INSTALL) -m 0644 packaging/podscope.toml $(DESTDIR)$(SYSCONFDIR)/podscope/podscope.toml
	$(INSTALL) -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/
	$(INSTALL) -m 0644 $(MAN8) $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 0644 completions/podscopectl.bash $(DESTDIR)$(BASHCOMPDIR)/podscopectl
	$(INSTALL) -m 0644 completions/_podscopectl $(DESTDIR)$(ZSHCOMPDIR)/_podscopectl
	$(INSTALL) -m 0644 completions/podscopectl.fish $(DESTDIR)$(FISHCOMPDIR)/podscopectl.fish
	$(INSTALL) -m 0644 README.md docs/ARCHITECTURE.md docs/OPERATIONS.md docs/PACKAGING.md polkit/50-podscope.rules.example \
	  $(DESTDIR)$(DOCDIR)/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/podscopectl $(addprefix $(DESTDIR)$(UNITDIR)/,$(EXEC_UNITS) $(PLAIN_UNITS)) \
	  $(DESTDIR)$(DBUSDIR)/system.d/org.podscope.Sandbox1.conf \
	  $(DESTDIR)$(DBUSDIR)/system-services/org.podscope.Sandbox1.service \
	  $(DESTDIR)$(DBUSDIR)/interfaces/org.podscope.Sandbox1.xml \
	  $(DESTDIR)$(POLKITDIR)/org.podscope.Sandbox1.policy \
	  $(DESTDIR)$(SYSUSERSDIR)/podscope.conf \
	  $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1))) \
	  $(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(MAN5))) \
	  $(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(MAN8))) \
	  $(DESTDIR)$(BASHCOMPDIR)/podscopectl $(DESTDIR)$(ZSHCOMPDIR)/_podscopectl \
	  $(DESTDIR)$(FISHCOMPDIR)/podscopectl.fish
	rm -rf $(DESTDIR)$(PKGLIBEXEC) $(DESTDIR)$(DOCDIR)

# Debian packages the build and the tests need (idempotent); deps-build
# only what make, make deb and make rpm need.
deps:
	tests/harness/install-deps.sh
deps-build:
	tests/harness/install-deps.sh build

# The release tarball: the committed tree at HEAD under podscope-VERSION/
# (crates are fetched by cargo; `cargo vendor` for an offline build).
dist:
	@mkdir -p target
	git archive --format=tar.gz --prefix=podscope-$(VERSION)/ -o target/podscope-$(VERSION).tar.gz HEAD
	@echo "dist: target/podscope-$(VERSION).tar.gz"

lint: deps
	$(TIMED) fmt $(CARGO) fmt --all -- --check
	$(TIMED) clippy $(CARGO) clippy --locked --workspace --all-targets --all-features -- -D warnings

unit: deps
	$(TIMED) unit $(CARGO) test --locked --workspace --lib --bins

# Property-based fuzzing of every parser of outside input (each crate's fuzz.rs):
# FUZZ_CASES inputs per target. `make check` runs a short pass on the unit
# tests' build; `make fuzz` a long one, optimised.
CHECK_FUZZ_CASES ?= 30000
FUZZ_CASES ?= 1000000
fuzz-short: deps
	FUZZ_CASES=$(CHECK_FUZZ_CASES) $(TIMED) fuzz tests/harness/fuzz.sh

fuzz: deps
	FUZZ_CASES=$(FUZZ_CASES) $(TIMED) fuzz tests/harness/fuzz.sh --release

# Integration tests run inside a private systemd with the project installed
# by `make install`, exactly as a packager would (crun 1.27 as the handler
# crun-userns beside the defaults).
integration: deps build
	$(need_cri_tools)
	$(call unxz_tool,CRUN_1_27_XZ,$(CRUN_1_27))
	CRICTL="$(CRICTL)" CRITEST="$(CRITEST)" CRUN_1_27="$(CRUN_1_27)" $(TIMED) integration \
	  tests/harness/run-integration.sh --skip isolation::

# The adversarial suite (tests/integration/isolation.rs, issue 41): each way out
# of a pod or up from `manage` that was found, played by its actor, in a
# harness of its own so that its time is its own.
isolation: deps build
	$(need_cri_tools)
	$(call unxz_tool,CRUN_1_27_XZ,$(CRUN_1_27))
	CRICTL="$(CRICTL)" CRITEST="$(CRITEST)" CRUN_1_27="$(CRUN_1_27)" $(TIMED) isolation \
	  tests/harness/run-integration.sh isolation::

# Each suite's time (timed.sh) again at the end, then the total, also when
# one fails (target/check-times.txt keeps them).
CHECK_TIMES := target/check-times.txt
check:
	@mkdir -p target && : > $(CHECK_TIMES)
	@TIMED_SUMMARY=$(abspath $(CHECK_TIMES)) $(TIMED) total sh -c '$(MAKE) --no-print-directory \
	  lint unit fuzz-short integration isolation packaging conformance e2e load cluster node; rc=$$?; \
	  echo "make check: time per suite" >&2; cat $(CHECK_TIMES) >&2; exit $$rc'

# crictl and critest against podscope-cri as installed, in the harness
# (crun 1.27 as the handler crun-userns): a missing tool fails here, before
# anything boots.
conformance: deps build
	$(need_cri_tools)
	$(call unxz_tool,CRITEST_1_36_XZ,$(K8S_1_36)/critest)
	$(call unxz_tool,CRICTL_1_36_XZ,$(K8S_1_36)/crictl)
	$(call unxz_tool,CRUN_1_27_XZ,$(CRUN_1_27))
	CRICTL="$(CRICTL)" CRITEST="$(CRITEST)" CRITEST_1_36="$(K8S_1_36)/critest" CRICTL_1_36="$(K8S_1_36)/crictl" \
	  CRUN_1_27="$(CRUN_1_27)" $(TIMED) conformance tests/harness/harness.sh run tests/conformance/conformance.sh

# A real kubelet, standalone, drives podscope through static pods in the
# harness (tests/e2e): a missing kubelet fails here, before anything boots.
e2e: deps build
	$(need_cri_tools)
	$(need_kubelet)
	$(call unxz_tool,KUBELET_1_36_XZ,$(K8S_1_36)/kubelet)
	KUBELET="$(KUBELET)" KUBELET_1_36="$(K8S_1_36)/kubelet" CRICTL="$(CRICTL)" $(TIMED) e2e tests/e2e/run-e2e.sh

# A real cluster (tests/cluster): Kubernetes 1.36's control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler from K8S_1_36_DIR,
# xz-packed) and two podscope nodes, each a harness with kubelet 1.36,
# checked with kubectl (KUBECTL: make deps installs it) and on the nodes.
K8S_1_36_DIR ?= $(abspath ../shared/tools/k8s-1.36)
KUBECTL ?= /var/cache/podscope-test/kubectl-1.37.1/bin/kubectl
CLUSTER_TOOLS := etcd kube-apiserver kube-controller-manager kube-scheduler kubelet crictl
# (The cluster's tools and crun 1.27 unpacked; a missing one fails.)
define cluster_tools
	@test -x "$(KUBECTL)" || { echo "$@: $(KUBECTL) not found (make deps installs it; or set KUBECTL=...)" >&2; exit 1; }
	@$(foreach f,$(CLUSTER_TOOLS),$(call unxz,$(K8S_1_36_DIR)/$(f).xz,$(K8S_1_36)/$(f),K8S_1_36_DIR) &&) true
	$(call unxz_tool,CRUN_1_27_XZ,$(CRUN_1_27))
endef
cluster: deps build
	$(cluster_tools)
	K8S="$(K8S_1_36)" KUBECTL="$(KUBECTL)" CRUN_1_27="$(CRUN_1_27)" $(TIMED) cluster tests/cluster/run-cluster.sh

# A full node's load (tests/load): 110 pods with 4 containers each created
# and drained by 8 CRI clients, again with podscoped restarted mid-burst,
# past a bus bound of 4 and under a low descriptor limit; nothing may fail
# or be left behind.
load: deps build
	$(TIMED) load tests/load/run-load.sh

# A real node (tests/node): Debian 12 booted in a VM, systemd as PID 1 on
# cgroup v2, podscope installed from its .deb with apt, the node suite run
# inside. The image is cached in NODE_CACHE, outside the repository. The
# .deb is make packaging's when it is newer than the binaries, else one
# built here.
NODE_CACHE ?= /var/cache/podscope-node
NODE_DEB := target/deb/podscope_$(VERSION)_amd64.deb
node: deps build
	$(need_cri_tools)
	$(need_kubelet)
	@deb=$(NODE_DEB); \
	if [ ! -f "$$deb" ] || [ "$$deb" -ot $(RELEASE)/podscoped ]; then \
	  DEB_OUT=target/deb-node LINTIAN=no $(TIMED) node-deb packaging/build-deb.sh || exit 1; \
	  deb=target/deb-node/podscope_$(VERSION)_amd64.deb; fi; \
	NODE_CACHE=$(NODE_CACHE) CRICTL="$(CRICTL)" KUBELET="$(KUBELET)" KUBELET_1_36_XZ="$(KUBELET_1_36_XZ)" \
	  CRITEST_1_36_XZ="$(CRITEST_1_36_XZ)" CRICTL_1_36_XZ="$(CRICTL_1_36_XZ)" \
	  $(TIMED) node tests/node/run-node.sh "$$deb"

# The packages, built as `make deb` / `make rpm` do, then installed,
# upgraded under a running pod and purged inside a harness where podscope
# is not otherwise installed.
packaging: deps build dist
	$(TIMED) dist tests/packaging/test-dist.sh target/podscope-$(VERSION).tar.gz $(VERSION)
	$(TIMED) deb packaging/build-deb.sh
	DEB_OUT=target/deb-newer DEB_VERSION=$(VERSION)+test1 LINTIAN=no $(TIMED) deb-newer packaging/build-deb.sh
	$(TIMED) rpm packaging/build-rpm.sh
	$(TIMED) packages tests/harness/harness.sh run-bare tests/packaging/test-packages.sh \
	  target/deb/podscope_$(VERSION)_*.deb target/deb-newer/podscope_$(VERSION)+test1_*.deb \
	  target/rpm/RPMS/*/podscope-$(VERSION)-*.rpm

# crictl and kubelet are optional here: the demo shows the CRI and kubelet
# parts only when they are there
# (the harness refuses a tool it is given that does not exist).
demo: deps build
	CRICTL="$(wildcard $(CRICTL))" KUBELET="$(wildcard $(KUBELET))" tests/harness/harness.sh run tests/harness/demo.sh

# The failpoints row kills a podscoped built with the `failpoints` feature
# (never installed; the same build the integration tests use). The kubelet
# section runs kubelet 1.26 (on containerd 1.6) and 1.36 (on containerd 2.3).
BENCH ?=
# BENCH names sections; none is all of them, the cluster's last.
bench_harness = $(or $(filter-out cluster,$(BENCH)),$(if $(BENCH),,all))
bench_cluster = $(or $(filter cluster,$(BENCH)),$(if $(BENCH),,all))
# The checkpoint section's CRIU: Debian 13's 4.1 (this kernel refuses
# Debian 12's 3.17), unpacked by bench/criu-trixie.sh outside the repository.
CRIU_TRIXIE ?= /var/cache/podscope-criu-trixie
bench_criu = $(filter all checkpoint,$(bench_harness))
bench: deps build
	$(need_cri_tools)
	$(need_kubelet)
	$(call unxz_tool,KUBELET_1_36_XZ,$(K8S_1_36)/kubelet)
	@$(foreach f,containerd containerd-shim-runc-v2,$(call unxz,$(CONTAINERD_2_3_XZ)/$(f).xz,$(CONTAINERD_2_3)/$(f),CONTAINERD_2_3_XZ) &&) true
	$(CARGO) build --locked -p podscoped --features failpoints --bins
	$(CARGO) build --release --locked -p podscope-bench
	@if [ -n "$(bench_harness)" ]; then \
	  criu=; if [ -n "$(bench_criu)" ]; then criu=$$(bench/criu-trixie.sh $(CRIU_TRIXIE)) || exit 1; fi; \
	  FAILPOINT_DAEMON=$(abspath target/debug/podscoped) CRICTL="$(CRICTL)" CRITEST="$(CRITEST)" KUBELET="$(KUBELET)" \
	  KUBELET_1_36="$(K8S_1_36)/kubelet" \
	  tests/harness/harness.sh run env CONTAINERD_2_3=$(CONTAINERD_2_3) CRIU_4_1=$$criu $(RELEASE)/podscope-bench \
	  $(filter-out cluster,$(BENCH)); fi
	$(if $(bench_cluster),$(cluster_tools))
	@if [ -n "$(bench_cluster)" ]; then \
	  K8S="$(K8S_1_36)" KUBECTL="$(KUBECTL)" CRUN_1_27="$(CRUN_1_27)" CONTAINERD_2_3=$(CONTAINERD_2_3) \
	  tests/cluster/run-cluster.sh bench; fi

# Binary packages, built from packaging/ into target/deb and target/rpm.
# They package the binaries `make build` made: dpkg-buildpackage and
# rpmbuild never run cargo (their environment, SOURCE_DATE_EPOCH among it,
# would make it compile everything again).
deb: deps-build build
	packaging/build-deb.sh

rpm: deps-build build
	packaging/build-rpm.sh

clean:
	$(CARGO) clean
