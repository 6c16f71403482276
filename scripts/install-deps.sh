#!/bin/sh
# Installs every package xbd needs to build and test on Debian 12, as root.
# Idempotent and quiet: packages already present are not reinstalled, and the
# package lists are refreshed only when something is missing.
set -eu

# (the line before the last: make check-xen's, QEMU and what builds its
# initramfs images, installed here so that nothing installs packages while
# the suite runs: scripts/test.sh makes check-xen's stages beside make
# check; the last: the arm64 cross build, its user-mode tests, and the
# Arm64 boot of make check-xen)
PKGS="build-essential autoconf automake libtool pkg-config
libxen-dev xenstore-utils libaio-dev liburing-dev libsystemd-dev libseccomp-dev strace
clang libclang-rt-14-dev llvm
fio nbdkit nbdkit-plugin-dev libnbd-bin libnbd-dev qemu-utils qemu-system-common
librbd-dev ceph-mon ceph-osd ceph-common uuid-runtime
gnuplot-nox python3 procps psmisc util-linux e2fsprogs jq
debhelper dpkg-dev lintian systemd prometheus debootstrap
qemu-system-x86 busybox-static cpio kmod file xz-utils zstd
gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static qemu-system-arm"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done

# The arm64 cross build's libraries: a sysroot of Debian's arm64 packages
# (scripts/sysroot-arm64.sh: libxen-dev and others are not Multi-Arch:
# same, so their :arm64 packages would replace the host's)
# (without it, only the arm64 build and its tests cannot run: said, not fatal)
sysroot() {
	sh "$(dirname "$0")/sysroot-arm64.sh" ||
		echo "install-deps: no arm64 sysroot: the arm64 cross build cannot be configured (scripts/configure-arm64.sh)" >&2
}

if [ -z "$missing" ]; then
	sysroot
	echo "install-deps: all build and test packages are present"
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: missing packages:$missing; run this script as root to install them" >&2
	exit 1
fi

echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# prometheus is here for promtool only: its server must not be started by
# the install.  A policy-rc.d of our own (removed again) says so, unless
# the machine has one already.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\n# install-deps: start no service while installing\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
sysroot
echo "install-deps: done"
