#!/bin/sh
# tests/build/disable-shared.sh: `./configure --disable-shared && make` builds
# (issue 22: a static build of the daemons is what some dom0 images want).
# Configures the source tree into a temporary build directory with
# --disable-shared, builds the default target, and checks what an admin would
# get: the daemons and tools are built and run, configure said why the nbdkit
# plugin (which nbdkit can only dlopen) is left out, and `make install` puts
# everything but the plugin in place; as root, its workers (no sanitizers:
# the seccomp list as a host has it) pass tests/blkback/workers.sh.  Built at -O0 without sanitizers so that
# it takes well under a minute.
. "$top_srcdir/tests/lib/sim.sh"

src=$(cd "$top_srcdir" && pwd)
[ -x "$src/configure" ] || skip "no $src/configure (run ./autogen.sh)"
# configure refuses a second build directory for a tree configured in place
[ ! -f "$src/config.status" ] ||
	skip "$src is configured in place; a separate build directory needs an unconfigured tree"
command -v make >/dev/null || skip "make is not installed"

dir=$(mktemp -d "${TMPDIR:-/tmp}/xbd-static.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$dir"' EXIT
cd "$dir" || fail "cd $dir"
# the harness's make must not lend its jobserver (or its -k, -s) to ours
unset MAKEFLAGS MFLAGS MAKELEVEL

"$src/configure" --disable-shared --enable-werror --prefix=/usr --sysconfdir=/etc \
	CFLAGS='-O0 -g0' >configure.log 2>&1 ||
	fail "configure --disable-shared failed: $(tail -3 configure.log)"

jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs" >make.log 2>&1 ||
	fail "make after configure --disable-shared failed: $(grep -E 'error|Error' make.log | head -3)"

for p in blkback/xbd-back xbdctl/xbdctl blkfront/xbd-front sim/xbd-sim xenstore/xbd-xenstored; do
	[ -x "$p" ] || fail "$p was not built"
	# a libtool wrapper script would mean it needs a shared library of ours
	case $(head -c 2 "$p") in '#!') fail "$p is a libtool wrapper script, not a program" ;; esac
done
[ ! -e blkfront/.libs/nbdkit-xbd-plugin.so ] || fail "a plugin .so was built with --disable-shared"
if pkg-config --exists nbdkit 2>/dev/null; then
	grep -q 'not building the nbdkit plugin.*--disable-shared' configure.log ||
		fail "configure did not say that the nbdkit plugin is left out: $(grep -i nbdkit configure.log)"
fi

# the daemon runs: its effective configuration, from the built binary
out=$(./blkback/xbd-back --check-config --config /dev/null 2>&1) ||
	fail "xbd-back --check-config failed: $out"
echo "$out" | grep -q '^types *= *vbd' || fail "xbd-back --check-config printed: $out"

make install DESTDIR="$dir/inst" >install.log 2>&1 ||
	fail "make install failed: $(grep -E 'error|Error' install.log | head -3)"
for f in usr/sbin/xbd-back usr/sbin/xbdctl etc/xen/scripts/xbd; do
	[ -e "inst/$f" ] || fail "make install did not install /$f"
done
plugin=$(find inst -name 'nbdkit-xbd-plugin*' | head -1)
[ -z "$plugin" ] || fail "make install installed a plugin with --disable-shared: $plugin"
echo "ok: configure --disable-shared && make && make install ($(grep -c '^  CC' make.log) compiles)"

# Its workers, as root: a build without sanitizers is the one whose
# seccomp list has nothing of theirs (the suite's own build adds their
# calls), so its data path must make no call outside the list.
if [ "$(id -u)" = 0 ]; then
	XBD_TEST_BACK=$dir/blkback/xbd-back sh "$top_srcdir/tests/blkback/workers.sh" >workers.log 2>&1 ||
		fail "tests/blkback/workers.sh with this build's xbd-back: $(grep -a 'FAIL\|not allowed' workers.log | head -3)"
	echo "ok: tests/blkback/workers.sh with this build's xbd-back (no sanitizers)"
fi
