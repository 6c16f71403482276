#!/bin/sh
# Online resize: the backing file grows, xbd-back is told (SIGHUP) and
# rewrites sectors + state; the attached xbd-front follows, so a new NBD
# connection to the running nbdkit export sees the new size, and the new
# end of the disk can be written and read.
. "$top_srcdir/tests/blkfront/front-lib.sh"
need_nbdkit
command -v nbdinfo >/dev/null || skip "nbdinfo is not installed"
front_setup

sock="$WORK/nbd.sock"
# shellcheck disable=SC2086 # NBDKIT_PRELOAD is a list of assignments
"$ASDOM" "$DOMU" env $NBDKIT_PRELOAD nbdkit -f -U "$sock" "$PLUGIN" vdev=xvdb >"$WORK/nbdkit.log" 2>&1 &
nbdkit_pid=$!
sim_on_exit "kill $nbdkit_pid; wait $nbdkit_pid"
sim_wait_for 10 test -S "$sock" || bk_fail "nbdkit did not start: $(cat "$WORK/nbdkit.log")"
uri="nbd+unix:///?socket=$sock"
size=$(nbdinfo --size "$uri") || bk_fail "nbdinfo failed"
[ "$size" = 16777216 ] || bk_fail "size before the resize is $size"

truncate -s 32M "$DISK"
kill -HUP "$BACK_PID"
grown() { [ "$(nbdinfo --size "$uri" 2>/dev/null)" = 33554432 ]; }
sim_wait_for 10 grown || bk_fail "the export did not grow to 32 MiB (now $(nbdinfo --size "$uri"))"
# the new last 4 KiB, written through the export, reach the backing file
if command -v qemu-io >/dev/null; then
	qemu-io -f raw -c "write -P 0x5a 33550336 4096" "$uri" >/dev/null ||
		bk_fail "qemu-io write at the new end failed"
	head -c 4096 /dev/zero | tr '\0' 'Z' >"$WORK/want.bin"
	tail -c 4096 "$DISK" | cmp -s - "$WORK/want.bin" || bk_fail "the new end of the disk was not written"
else
	echo "qemu-io not installed: write at the new end skipped"
fi
exit 0
