# podscope — build, install, test, demo, benchmark.
#
#   make            build release binaries
#   make install    install (honours DESTDIR, PREFIX, LIBEXECDIR, UNITDIR, ...)
#   make check      every test: fmt, clippy, unit tests, integration tests in a
#                   private systemd (tests/harness), installing what it needs
#   make demo       a pod created, inspected with systemctl/busctl, stopped, removed
#   make bench      the performance table

PREFIX      ?= /usr
BINDIR      ?= $(PREFIX)/bin
LIBEXECDIR  ?= $(PREFIX)/libexec
DATADIR     ?= $(PREFIX)/share
SYSCONFDIR  ?= /etc
UNITDIR     ?= $(shell pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /lib/systemd/system)
DBUSDIR     ?= $(DATADIR)/dbus-1
POLKITDIR   ?= $(DATADIR)/polkit-1/actions
PKGLIBEXEC  := $(LIBEXECDIR)/podscope
CARGO       ?= cargo
RELEASE     := target/release
INSTALL     ?= install

BINARIES := podscoped podscopectl podscope-init podscope-netns podscope-cri podscope-bench

.PHONY: all build install uninstall deps check lint unit integration demo bench clean

all: build

build:
	$(CARGO) build --release --locked --bins

install:
	@for b in podscoped podscopectl podscope-init podscope-netns podscope-cri; do \
	  test -x $(RELEASE)/$$b || { echo "$(RELEASE)/$$b missing: run 'make' first" >&2; exit 1; }; done
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGLIBEXEC) $(DESTDIR)$(UNITDIR) \
	  $(DESTDIR)$(DBUSDIR)/system.d $(DESTDIR)$(DBUSDIR)/system-services $(DESTDIR)$(DBUSDIR)/interfaces \
	  $(DESTDIR)$(POLKITDIR) $(DESTDIR)$(SYSCONFDIR)/podscope $(DESTDIR)$(DATADIR)/doc/podscope
	$(INSTALL) -m 0755 $(RELEASE)/podscopectl $(DESTDIR)$(BINDIR)/podscopectl
	$(INSTALL) -m 0755 $(RELEASE)/podscoped $(RELEASE)/podscope-init $(RELEASE)/podscope-netns $(RELEASE)/podscope-cri $(DESTDIR)$(PKGLIBEXEC)/
	sed 's|/usr/libexec/podscope|$(PKGLIBEXEC)|g' units/podscoped.service > $(DESTDIR)$(UNITDIR)/podscoped.service
	sed 's|/usr/libexec/podscope|$(PKGLIBEXEC)|g' units/podscope-netns@.service > $(DESTDIR)$(UNITDIR)/podscope-netns@.service
	sed 's|/usr/libexec/podscope|$(PKGLIBEXEC)|g' units/podscope-cri.service > $(DESTDIR)$(UNITDIR)/podscope-cri.service
	$(INSTALL) -m 0644 units/podscope.slice units/podscope-cri.socket $(DESTDIR)$(UNITDIR)/
	$(INSTALL) -m 0644 dbus/org.podscope.Sandbox1.conf $(DESTDIR)$(DBUSDIR)/system.d/
	$(INSTALL) -m 0644 dbus/org.podscope.Sandbox1.service $(DESTDIR)$(DBUSDIR)/system-services/
	$(INSTALL) -m 0644 dbus/org.podscope.Sandbox1.xml $(DESTDIR)$(DBUSDIR)/interfaces/
	$(INSTALL) -m 0644 polkit/org.podscope.Sandbox1.policy $(DESTDIR)$(POLKITDIR)/
	test -e $(DESTDIR)$(SYSCONFDIR)/podscope/podscope.toml || \
	  $(INSTALL) -m 0644 packaging/podscope.toml $(DESTDIR)$(SYSCONFDIR)/podscope/podscope.toml
	$(INSTALL) -m 0644 README.md docs/ARCHITECTURE.md polkit/50-podscope.rules.example $(DESTDIR)$(DATADIR)/doc/podscope/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/podscopectl $(DESTDIR)$(UNITDIR)/podscoped.service $(DESTDIR)$(UNITDIR)/podscope.slice \
	  $(DESTDIR)$(UNITDIR)/podscope-netns@.service \
	  $(DESTDIR)$(UNITDIR)/podscope-cri.service $(DESTDIR)$(UNITDIR)/podscope-cri.socket \
	  $(DESTDIR)$(DBUSDIR)/system.d/org.podscope.Sandbox1.conf \
	  $(DESTDIR)$(DBUSDIR)/system-services/org.podscope.Sandbox1.service \
	  $(DESTDIR)$(DBUSDIR)/interfaces/org.podscope.Sandbox1.xml \
	  $(DESTDIR)$(POLKITDIR)/org.podscope.Sandbox1.policy
	rm -rf $(DESTDIR)$(PKGLIBEXEC) $(DESTDIR)$(DATADIR)/doc/podscope

# Debian packages the build and the tests need (idempotent).
deps:
	tests/harness/install-deps.sh

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets --all-features -- -D warnings

unit: deps
	$(CARGO) test --locked --lib

# Integration tests run inside a private systemd with the project installed
# by `make install`, exactly as a packager would.
integration: deps build
	tests/harness/run-integration.sh

check: lint unit integration

demo: deps build
	tests/harness/harness.sh run tests/harness/demo.sh

bench: deps build
	tests/harness/harness.sh run $(RELEASE)/podscope-bench

clean:
	$(CARGO) clean
