#!/bin/sh
# tests/ring/arm64-user.sh: the ring library and the crash journal work on
# arm64 (issue 46): their unit tests, cross-compiled with Debian's
# aarch64-linux-gnu-gcc (static, the cross libc; Xen's public headers are
# the host's, which hold every architecture's), run under qemu-aarch64
# user-mode emulation.  test-ring-abi checks the arm-abi layout there
# (native = what xen/io/blkif.h gives an arm64 compiler, against the fixed
# offsets Linux blkback uses); -validate, -notify and -frontback the rules
# and the notification arithmetic; test-journal the journal's ordering
# argument at every instant; test-ring-threads a frontend and a backend
# thread on one ring.  (The issue saw a threaded program hang under
# Debian 12's qemu-aarch64-static; a static one runs: test-ring-threads
# passed 5 runs of 5 there in half a second each.)  qemu-user runs on the
# host's memory order (x86's), so no missing barrier shows here:
# arm64-barriers.sh looks for them in the code.  Skips without the cross
# compiler or qemu-user.
. "$top_srcdir/tests/lib/sim.sh"

command -v aarch64-linux-gnu-gcc >/dev/null || skip "no aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu)"
qemu=
for q in qemu-aarch64-static qemu-aarch64; do
	command -v $q >/dev/null && { qemu=$q; break; }
done
[ -n "$qemu" ] || skip "no qemu-aarch64 user-mode emulator (Debian: qemu-user-static)"
[ -f /usr/include/xen/io/blkif.h ] || skip "no /usr/include/xen (Debian: libxen-dev)"

dir=$(mktemp -d "${TMPDIR:-/tmp}/xbd-arm64.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$dir"' EXIT
# Xen's headers alone from the host's /usr/include (its libc's would clash)
mkdir "$dir/inc" && ln -s /usr/include/xen "$dir/inc/xen"
src=$top_srcdir
cc() {  # OUT SOURCES...: a static aarch64 program
	out=$1; shift
	aarch64-linux-gnu-gcc -static -O2 -g0 -Wall -Wextra -Wno-unused-parameter -Werror -std=gnu11 \
		-D_GNU_SOURCE -I"$src" -I"$top_builddir" -I"$dir/inc" -o "$dir/$out" "$@" 2>"$dir/$out.cc" ||
		fail "cross-compiling $out: $(head -5 "$dir/$out.cc")"
}
ring="$src/ring/abi.c $src/ring/ring.c $src/ring/back.c $src/ring/front.c $src/ring/validate.c"
for t in test-ring-abi test-ring-validate test-ring-notify test-ring-frontback test-ring-threads; do
	# shellcheck disable=SC2086
	cc $t "$src/tests/ring/$t.c" $ring -pthread
done
cc test-journal "$src/tests/blkback/test-journal.c" "$src/blkback/datapath/journal.c"
file "$dir/test-ring-abi" | grep -q 'ARM aarch64' || fail "the cross compiler made no arm64 program: $(file "$dir/test-ring-abi")"

bad=
for t in test-ring-abi test-ring-validate test-ring-notify test-ring-frontback test-ring-threads test-journal; do
	# (test-journal makes its files in the current directory's TMPDIR)
	if (cd "$dir" && TMPDIR=$dir timeout 120 $qemu "./$t") >"$dir/$t.log" 2>&1; then
		echo "ok: $t under $qemu ($(wc -l <"$dir/$t.log") lines of output)"
	else
		echo "$t under $qemu failed:"; tail -15 "$dir/$t.log"
		bad="$bad $t"
	fi
done
[ -z "$bad" ] || fail "on arm64 (qemu-user):$bad"
echo "ok: the ring and journal unit tests pass on arm64 (qemu-user)"
