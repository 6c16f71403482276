#!/bin/sh
# xbd-front check passes against xbd-back on the simulator: every op, first
# and last sector, flush, FUA, discard, the largest indirect request, every
# queue, vectored I/O, persistent and per-request grants, the x86_32 ABI,
# reattach, and a frontend-initiated reconnect with writes in flight.
. "$top_srcdir/tests/blkfront/front-lib.sh"
# two queues whatever the number of CPUs here
BACK_OPTS="--max-queues 2"
front_setup --discard-enable 1

out=$("$ASDOM" "$DOMU" "$XBD_FRONT" check --vdev xvdb --queues 2 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || bk_fail "xbd-front check exited $rc"
echo "$out" | grep -q '^PASS: ' || bk_fail "no PASS summary"
echo "$out" | grep -q '^FAIL' && bk_fail "a check failed"
for name in 'write+read first sector' 'write+read last sector' 'flush after write' \
	'FUA write then read' 'largest indirect request' 'queue 0' 'queue 1' 'concurrent requests' \
	'vectored write+read' 'write+read 3 sectors at sector 1' 'reconnect with writes in flight' \
	'discard then read' '\[per-request grants\] attach' '\[x86_32-abi\] write+read first sector' \
	'\[1 page, 1 queue, no indirect\] largest direct request' '\[32 grants\] concurrent requests'; do
	echo "$out" | grep -q "^ok   .*$name" || bk_fail "check '$name' did not pass"
done
exit 0
