#!/bin/bash
# The package tests, run by `make check` inside a harness where podscope is
# NOT installed (harness.sh run-bare): the .deb built by `make deb` is
# installed with dpkg, used, upgraded under a running pod, and purged; the
# .rpm built by `make rpm` must carry the same files.
#
#   test-packages.sh DEB NEWER_DEB RPM
set -euo pipefail
DEB=$1 NEWER_DEB=$2 RPM=$3
PASSED=0
step() { printf '\n== %s\n' "$*"; }
ok() { PASSED=$((PASSED + 1)); printf 'ok %d - %s\n' "$PASSED" "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; journalctl -u podscoped --no-pager -n 30 >&2 || true; exit 1; }
# expect DESCRIPTION COMMAND...: COMMAND must succeed.
expect() { local what=$1; shift; "$@" || fail "$what (command: $*)"; ok "$what"; }
# refuse DESCRIPTION COMMAND...: COMMAND must fail.
refuse() { local what=$1; shift; if "$@"; then fail "$what (command succeeded: $*)"; fi; ok "$what"; }
# within SECONDS COMMAND...: retry until COMMAND succeeds.
within() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}
as_user() { setpriv --reuid=podtester --regid=podtester --init-groups "$@"; }
state_of() { busctl get-property org.podscope.Sandbox1 "/org/podscope/Sandbox1/sandbox/$1" org.podscope.Sandbox1.Sandbox State | awk '{print $2}' | tr -d '"'; }
main_pid() { systemctl show -p MainPID --value "$1"; }
# The processes in a pod's scope (cgroup v2, or the unified tree of hybrid).
scope_procs() {
    local cg
    cg=$(systemctl show -p ControlGroup --value "podscope-$1.scope")
    cat "/sys/fs/cgroup/unified$cg/cgroup.procs" 2>/dev/null || cat "/sys/fs/cgroup$cg/cgroup.procs"
}
UNITS=(podscoped.service podscope-cri.service podscope-cri.socket podscope-netns@.service podscope.slice)

step "nothing of podscope before the package"
# This machine image forbids maintainer scripts to start services (a Docker
# build habit: /usr/sbin/policy-rc.d exits 101). A node does not; the
# harness's root is a throw-away overlay, so drop it there.
rm -f /usr/sbin/policy-rc.d
refuse "no podscoped unit yet" test -e /lib/systemd/system/podscoped.service
refuse "no podscopectl yet" command -v podscopectl

step "dpkg -i $(basename "$DEB")"
expect "the package installs" dpkg -i "$DEB"
for u in "${UNITS[@]}"; do
    expect "unit $u installed" test -f "/lib/systemd/system/$u"
done
expect "podscoped.service enabled" systemctl is-enabled --quiet podscoped.service
expect "the podscope group exists (sysusers.d)" getent group podscope
expect "podscope-cri.socket enabled" systemctl is-enabled --quiet podscope-cri.socket
expect "podscope-cri.socket listening" systemctl is-active --quiet podscope-cri.socket
expect "the CRI socket exists" test -S /run/podscope/cri.sock
expect "the config is a conffile" grep -qx /etc/podscope/podscope.toml /var/lib/dpkg/info/podscope.conffiles
expect "man podscoped(8) installed" test -f /usr/share/man/man8/podscoped.8.gz
expect "bash completion installed" test -f /usr/share/bash-completion/completions/podscopectl
expect "the operations guide installed" test -f /usr/share/doc/podscope/OPERATIONS.md.gz

step "systemd-analyze verify, every unit"
for u in "${UNITS[@]}"; do
    target=$u
    [[ $u == podscope-netns@.service ]] && target=podscope-netns@0.service
    out=$(systemd-analyze verify "$target" 2>&1) || fail "systemd-analyze verify $target: $out"
    # verify also reports on units these pull in; none of ours may appear.
    if grep -q podscope <<<"$out"; then fail "systemd-analyze verify $target: $out"; fi
    ok "systemd-analyze verify $target"
done

step "the documents give the hardening scores systemd-analyze measures"
doc() { echo "/usr/share/doc/podscope/$1.gz"; }
for u in podscoped.service podscope-cri.service podscope-netns@.service; do
    target=$u
    [[ $u == podscope-netns@.service ]] && target=podscope-netns@0.service
    score=$(systemd-analyze security --no-pager "$target" 2>/dev/null |
        sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p')
    [[ -n $score ]] || fail "systemd-analyze security $target gave no score"
    expect "PACKAGING.md gives $u's $score" zgrep -qF "| \`$u\` | **$score " "$(doc PACKAGING.md)"
    [[ $u == podscope-netns@.service ]] && continue
    for d in README.md ARCHITECTURE.md; do
        expect "$d gives $u's $score" zgrep -qF "${u%.service} $score" "$(doc $d)"
    done
done

step "the first D-Bus call activates podscoped"
systemctl stop podscoped.service
refuse "podscoped stopped" systemctl is-active --quiet podscoped.service
expect "Version over D-Bus" busctl call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Version
expect "podscoped active after the call" systemctl is-active --quiet podscoped.service
intro=$(busctl introspect org.podscope.Sandbox1 /org/podscope/Sandbox1)
for iface in org.podscope.Sandbox1.Manager org.freedesktop.DBus.ObjectManager; do
    expect "busctl introspect shows $iface" grep -q "^$iface " <<<"$intro"
done

step "root creates a pod"
id=$(podscopectl create pkg-pod --namespace pkgtest --start) || fail "podscopectl create"
ok "created $id"
expect "the pod is ready" test "$(state_of "$id")" = ready
expect "its scope is active" systemctl is-active --quiet "podscope-$id.scope"
expect "its netns unit is active" systemctl is-active --quiet "podscope-netns@$id.service"

step "an unprivileged user: denied, then allowed by the example rule and group"
id -u podtester >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin podtester
expect "podtester may read" as_user podscopectl status "$id" >/dev/null
if err=$(as_user podscopectl stop "$id" 2>&1); then fail "podtester stopped the pod"; fi
ok "podtester may not stop the pod"
expect "the denial names the polkit action ($err)" \
    grep -q "denied.*org.podscope.Sandbox1.manage" <<<"$err"
expect "the denied call changed nothing" test "$(state_of "$id")" = ready
usermod -a -G podscope podtester
install -m 0644 /usr/share/doc/podscope/50-podscope.rules.example /etc/polkit-1/rules.d/50-podscope.rules
# polkitd notices the new rule on its own (inotify).
user_id=$(within 20 as_user podscopectl create user-pod --namespace pkgtest --start) \
    || fail "podtester could not create a pod with the rule in place"
ok "podtester creates a pod once the rule is in place"
expect "podtester removes its pod" as_user podscopectl rm "$user_id"
rm /etc/polkit-1/rules.d/50-podscope.rules

step "upgrade to $(basename "$NEWER_DEB") while the pod runs"
daemon_before=$(main_pid podscoped.service)
init_before=$(scope_procs "$id")
invocation_before=$(systemctl show -p InvocationID --value "podscope-$id.scope")
expect "the newer package installs over the old" dpkg -i "$NEWER_DEB"
expect "the newer version is installed" test "$(dpkg-query -W -f='${Version}' podscope)" = "$(dpkg-deb -f "$NEWER_DEB" Version)"
expect "podscoped is active again" within 10 systemctl is-active --quiet podscoped.service
expect "podscoped was restarted onto the new binary" test "$(main_pid podscoped.service)" != "$daemon_before"
expect "the pod is still ready" test "$(state_of "$id")" = ready
expect "its scope is the same, untouched" test "$(systemctl show -p InvocationID --value "podscope-$id.scope")" = "$invocation_before"
expect "its init is the same process ($init_before)" test "$(scope_procs "$id")" = "$init_before"

step "purge while a pod is left keeps the state"
expect "dpkg --purge" dpkg --purge podscope
refuse "the units are gone" test -e /lib/systemd/system/podscoped.service
expect "the pod's scope still runs" systemctl is-active --quiet "podscope-$id.scope"
expect "its checkpoint is kept" test -d "/var/lib/podscope/sandboxes/$id"

step "reinstall, remove the pod, purge"
expect "reinstall" dpkg -i "$NEWER_DEB"
expect "the daemon recovered the pod" within 10 test "$(state_of "$id")" = ready
expect "podscopectl rm" podscopectl rm "$id"
refuse "the scope is gone" systemctl is-active --quiet "podscope-$id.scope"
# An image store the admin moved: named on removal, never deleted.
mkdir -p /srv/podscope-images && touch /srv/podscope-images/keep
echo 'image_dir = "/srv/podscope-images"' >> /etc/podscope/podscope.toml
purge_out=$(dpkg --purge podscope 2>&1) || fail "dpkg --purge: $purge_out"
ok "dpkg --purge"
expect "the purge names the moved image_dir ($purge_out)" \
    grep -q "image_dir /srv/podscope-images is not under /var/lib/podscope" <<<"$purge_out"
expect "the moved image_dir is left" test -e /srv/podscope-images/keep
rm -rf /srv/podscope-images
refuse "/var/lib/podscope is removed" test -e /var/lib/podscope
refuse "/etc/podscope is removed" test -e /etc/podscope/podscope.toml
refuse "no podscoped process is left" pgrep -x podscoped

step "the RPM carries the same files as the .deb"
# Files only (directories differ in how each format owns them); the .deb's
# units are in /lib (Debian 12's systemd.pc), compressed man pages and docs
# are each format's own business, and /usr/share/doc differs by design
# (Debian's copyright and changelog, RPM's %license), as do lintian's
# overrides (Debian's).
normalize() { sed -e 's|^/lib/|/usr/lib/|' -e 's|\.gz$||' | grep -v -e '^/usr/share/doc/' -e '^/usr/share/lintian/' | sort; }
deb_files=$(dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\.||' | normalize)
rpm_files=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$RPM" | awk '$1 !~ /^d/ {print $2}' | normalize)
if [[ $deb_files != "$rpm_files" ]]; then
    diff <(echo "$deb_files") <(echo "$rpm_files") >&2 || true
    fail "the RPM and the .deb install different files"
fi
ok "same $(wc -l <<<"$deb_files") files in the RPM and the .deb"
for doc in 50-podscope.rules.example README.md OPERATIONS.md; do
    expect "the RPM has the doc $doc" grep -q "/usr/share/doc/podscope/$doc" <(rpm -qlp "$RPM")
done
expect "the RPM marks the config noreplace" grep -qx /etc/podscope/podscope.toml <(rpm -qcp "$RPM")

printf '\npackage tests: %d passed\n' "$PASSED"
