#!/bin/sh
# xbd-front check passes against xbd-back on the simulator: every op, first
# and last sector, flush, FUA, discard, the largest indirect request, every
# queue, persistent and per-request grants, the x86_32 ABI, reattach.
. "$top_srcdir/tests/blkfront/front-lib.sh"
front_setup --discard-enable 1

out=$(as_domu "$XBD_FRONT" check --vdev xvdb 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || front_fail "xbd-front check exited $rc"
echo "$out" | grep -q '^PASS: ' || front_fail "no PASS summary"
echo "$out" | grep -q '^FAIL' && front_fail "a check failed"
for name in 'write+read first sector' 'write+read last sector' 'flush after write' \
	'FUA write then read' 'largest indirect request' 'queue 0' 'concurrent requests' \
	'discard then read' '\[per-request grants\] attach' '\[x86_32-abi\] write+read first sector' \
	'\[1 page, 1 queue, no indirect\] largest direct request'; do
	echo "$out" | grep -q "^ok   .*$name" || front_fail "check '$name' did not pass"
done
exit 0
