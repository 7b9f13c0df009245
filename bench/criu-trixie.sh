#!/bin/bash
# make bench's checkpoint section: CRIU 4.1 for this machine's kernel.
# Debian 12's criu 3.17 refuses kernels past 6.x's vDSO change ("vdso:
# Unexpected rt vDSO area bounds", fixed in CRIU 4.1); Debian 13 (trixie)
# has 4.1 with a newer libc. Its .deb and its libraries' .debs are fetched
# with apt from Debian's trixie suite into a private apt directory (this
# machine's apt and dpkg untouched), unpacked under CACHE/root, and run
# through trixie's own loader by a wrapper, CACHE/criu, whose path is
# printed: runc takes it as its `--criu` program. Built once, again when
# this script changes. Nothing is installed on the machine.
#
#   bench/criu-trixie.sh CACHE_DIR     (default /var/cache/podscope-criu-trixie)
set -euo pipefail
CACHE=${1:-/var/cache/podscope-criu-trixie}
say() { echo "criu-trixie: $*" >&2; }
key=$(sha256sum "$0" | cut -c1-16)
if [[ -x $CACHE/criu && $(cat "$CACHE/key" 2>/dev/null) == "$key" ]]; then
    echo "$CACHE/criu"
    exit 0
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -s $keyring ]] || { say "$keyring not found (Debian's debian-archive-keyring)"; exit 1; }
say "fetching Debian 13's criu and its libraries into $CACHE (once; cached)"
rm -rf "$CACHE"
A=$CACHE/apt
mkdir -p "$A/lists/partial" "$A/archives/partial" "$A/cache" "$A/etc/sources.list.d" "$A/etc/preferences.d"
: > "$A/status"
echo "deb [signed-by=$keyring] http://deb.debian.org/debian trixie main" > "$A/etc/sources.list"
cat > "$A/apt.conf" <<EOF
Dir::Etc::SourceList "$A/etc/sources.list";
Dir::Etc::SourceParts "$A/etc/sources.list.d";
Dir::Etc::Preferences "$A/etc/preferences";
Dir::Etc::PreferencesParts "$A/etc/preferences.d";
Dir::State::Lists "$A/lists";
Dir::State::status "$A/status";
Dir::Cache "$A/cache";
Dir::Cache::Archives "$A/archives";
APT::Architecture "amd64";
Acquire::Languages "none";
EOF
export APT_CONFIG=$A/apt.conf
apt-get -qq update >&2 || { say "apt-get update of trixie failed"; exit 1; }
# An empty dpkg status: criu and everything it needs down to trixie's libc.
apt-get -qq install -y --download-only --no-install-recommends -o Debug::NoLocking=1 criu >&2 \
    || { say "fetching trixie's criu failed"; exit 1; }
mkdir -p "$CACHE/root"
for deb in "$A"/archives/*.deb; do dpkg-deb -x "$deb" "$CACHE/root"; done
rm -rf "$A/archives" "$A/lists" "$A/cache"
lib=$CACHE/root/usr/lib/x86_64-linux-gnu
[[ -x $lib/ld-linux-x86-64.so.2 && -x $CACHE/root/usr/sbin/criu ]] \
    || { say "trixie's loader or criu is missing under $CACHE/root"; exit 1; }
cat > "$CACHE/criu" <<EOF
#!/bin/sh
# Debian 13's criu through Debian 13's loader and libraries ($CACHE/root);
# written by bench/criu-trixie.sh.
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$CACHE/root/usr/sbin/criu" "\$@"
EOF
chmod 0755 "$CACHE/criu"
version=$("$CACHE/criu" --version | sed -n 's/^Version: //p')
[[ $version == 4.* ]] || { say "the unpacked criu says version '${version}', not 4.x"; exit 1; }
echo "$key" > "$CACHE/key"
say "criu $version at $CACHE/criu"
echo "$CACHE/criu"
