#!/bin/sh
# scripts/sysroot-arm64.sh [--suite SUITE] [DIR]: makes DIR (default
# /opt/xbd-sysroot-arm64) the arm64 sysroot xbd cross-builds against:
# the arm64 packages of Debian 12 (or of SUITE, e.g. trixie, from the
# host's mirror: make check-xen's arm64-deb13 build) of
# its build dependencies (libxen-dev, libaio-dev, liburing-dev,
# libsystemd-dev, libseccomp-dev, libnbd-dev, nbdkit-plugin-dev, the
# headers of librbd-dev, libc6-dev) and what they depend on, unpacked with
# dpkg-deb -x.  No arm64 code runs, and the host's own packages are left
# alone: libxen-dev, libnbd-dev and librbd-dev are not Multi-Arch: same in
# Debian 12, so `apt-get install libxen-dev:arm64` would remove the host's
# libxen-dev (and fio, nbdkit and ceph with their libraries).  The
# packages come through a private apt configuration (APT::Architecture
# arm64, its own lists and an empty dpkg status) from the host's apt
# sources.  Idempotent and quiet: a sysroot made from the same list is
# left as it is.  Run as root (scripts/install-deps.sh runs it).
#
# Then scripts/configure-arm64.sh, from a build directory, configures
# the cross build against it.
set -eu

suite=
if [ "${1:-}" = --suite ]; then
	suite=${2:?--suite needs a Debian release name}
	shift 2
fi
case $suite in ''|[a-z]*) ;; *) echo "sysroot-arm64: --suite takes a release name (trixie), not '$suite'" >&2; exit 2 ;; esac
dir=${1:-/opt/xbd-sysroot-arm64}
case $dir in /*) ;; *) echo "sysroot-arm64: DIR must be an absolute path, not '$dir'" >&2; exit 2 ;; esac
# linked against, with their dependencies
PKGS="libc6-dev libxen-dev libaio-dev liburing-dev libsystemd-dev libseccomp-dev libnbd-dev nbdkit-plugin-dev"
# headers only (xbd-back dlopens librbd at run time): without their
# dependencies, which are most of Ceph's libraries
HDRS="librbd-dev librados-dev"

stamp="${suite:-host} $PKGS / $HDRS"
if [ "$(cat "$dir/.xbd-sysroot" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "sysroot-arm64: $dir is missing or out of date; run this script as root" >&2
	exit 1
fi
echo "sysroot-arm64: making $dir from Debian's arm64 packages"
a=$(mktemp -d /var/tmp/xbd-apt-arm64.XXXXXX)
trap 'rm -rf "$a"' EXIT
mkdir -p "$a/lists/partial" "$a/archives/partial" "$a/etc/preferences.d"
: >"$a/status"
# the host's sources (or SUITE's main from the host's mirror), read for
# arm64 into lists of our own
src=
if [ -n "$suite" ]; then
	mirror=$( { sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null
		awk '$1 == "deb" && $2 ~ /\/debian\/?$/ { print $2 }' /etc/apt/sources.list 2>/dev/null; } | head -1)
	[ -n "$mirror" ] || { echo "sysroot-arm64: no Debian mirror in the host's apt sources" >&2; exit 1; }
	echo "deb $mirror $suite main" >"$a/sources.list"
	src="-o Dir::Etc::sourcelist=$a/sources.list -o Dir::Etc::sourceparts=$a/none"
fi
apt_arm64() {
	# shellcheck disable=SC2086
	apt-get -q -o APT::Architecture=arm64 -o APT::Architectures::=arm64 $src \
		-o Dir::State::Lists="$a/lists" -o Dir::State::status="$a/status" \
		-o Dir::Cache="$a" -o Dir::Cache::archives="$a/archives" \
		-o Dir::Etc::preferencesparts="$a/etc/preferences.d" \
		-o Debug::NoLocking=1 -o APT::Get::List-Cleanup=0 "$@"
}
apt_arm64 update >"$a/update.log" 2>&1 ||
	{ echo "sysroot-arm64: apt-get update for arm64 failed:" >&2; tail -5 "$a/update.log" >&2; exit 1; }
# shellcheck disable=SC2086
apt_arm64 install -y -d --no-install-recommends $PKGS >"$a/install.log" 2>&1 ||
	{ echo "sysroot-arm64: fetching $PKGS for arm64 failed:" >&2; tail -5 "$a/install.log" >&2; exit 1; }
# shellcheck disable=SC2086
(cd "$a/archives" && apt_arm64 download $HDRS) >"$a/download.log" 2>&1 ||
	{ echo "sysroot-arm64: fetching $HDRS for arm64 failed:" >&2; tail -5 "$a/download.log" >&2; exit 1; }
rm -rf "$dir.new"
mkdir -p "$dir.new"
for d in "$a"/archives/*.deb; do
	dpkg-deb -x "$d" "$dir.new"
done
# Absolute symbolic links (libfoo.so -> /lib/aarch64-linux-gnu/libfoo.so.1)
# would name the host's files: made relative to the sysroot
find "$dir.new" -type l | while read -r l; do
	t=$(readlink "$l")
	case $t in /*) ln -sfn "$dir$t" "$l" ;; esac
done
# libc's linker script names /lib/aarch64-linux-gnu/libc.so.6 and
# /lib/ld-linux-aarch64.so.1, which the linker looks for under the
# sysroot: Debian 13's packages put them under /usr only (merged /usr),
# so /lib is made what a merged system has, a link to usr/lib
[ -e "$dir.new/lib" ] || ln -s usr/lib "$dir.new/lib"
ls "$a"/archives/*.deb | sed 's|.*/||' >"$dir.new/.xbd-sysroot-debs"
echo "$stamp" >"$dir.new/.xbd-sysroot"
rm -rf "$dir"
mv "$dir.new" "$dir"
echo "sysroot-arm64: $(wc -l <"$dir/.xbd-sysroot-debs") packages in $dir"
