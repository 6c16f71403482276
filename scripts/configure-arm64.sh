#!/bin/sh
# scripts/configure-arm64.sh [--sysroot DIR] [CONFIGURE-ARGS...]: configures
# the current directory to cross-build xbd for arm64 (Debian's
# aarch64-linux-gnu-gcc) against the sysroot scripts/sysroot-arm64.sh made
# (default /opt/xbd-sysroot-arm64, Debian 12's libraries; scripts/install-deps.sh
# makes it).  The rest of the arguments go to configure as they are:
#   mkdir -p _build/arm64 && cd _build/arm64 && ../../scripts/configure-arm64.sh && make
#   ../../scripts/configure-arm64.sh --disable-shared    # the static build
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
sysroot=/opt/xbd-sysroot-arm64
if [ "${1:-}" = --sysroot ]; then
	sysroot=${2:?--sysroot needs a directory}
	shift 2
fi
if [ ! -f "$sysroot/.xbd-sysroot" ]; then
	echo "configure-arm64: no arm64 sysroot in $sysroot: run scripts/install-deps.sh (or scripts/sysroot-arm64.sh) as root" >&2
	exit 1
fi
command -v aarch64-linux-gnu-gcc >/dev/null ||
	{ echo "configure-arm64: no aarch64-linux-gnu-gcc: install gcc-aarch64-linux-gnu (scripts/install-deps.sh does)" >&2; exit 1; }
[ -x "$top/configure" ] || { echo "configure-arm64: no $top/configure: run ./autogen.sh first" >&2; exit 1; }
# The sysroot's .pc files name /usr/...: pkg-config prefixes the sysroot to
# their -I and -L, and looks nowhere else (not at the host's amd64 ones)
exec "$top/configure" --host=aarch64-linux-gnu --with-sysroot="$sysroot" \
	CC="aarch64-linux-gnu-gcc --sysroot=$sysroot" \
	PKG_CONFIG_LIBDIR="$sysroot/usr/lib/aarch64-linux-gnu/pkgconfig:$sysroot/usr/share/pkgconfig" \
	PKG_CONFIG=pkg-config PKG_CONFIG_SYSROOT_DIR="$sysroot" "$@"
