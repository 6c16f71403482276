#!/bin/sh
# A read-only vbd (mode r): xbd-front sees it read-only, reads work, and
# both the library and the backend refuse writes.
. "$top_srcdir/tests/blkfront/front-lib.sh"
front_setup
cp "$DISK" "$WORK/ro.img"
RO=$(add_disk "$DOMU" xvdc "$WORK/ro.img" --mode r) || exit 1
sim_wait_for 10 state_is "$DOMU" "$RO" 2 || bk_fail "xbd-back did not pick up xvdc"

out=$("$ASDOM" "$DOMU" "$XBD_FRONT" check --vdev xvdc --no-reopen 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || bk_fail "xbd-front check on a read-only disk exited $rc"
echo "$out" | grep -q '^ok   .*read-only: backend refuses writes' || bk_fail "backend did not refuse a write"
echo "$out" | grep -q '^ok   .*read-only: library refuses writes' || bk_fail "library did not refuse a write"
cmp -s "$DISK" "$WORK/ro.img" || bk_fail "the read-only image was modified"
exit 0
