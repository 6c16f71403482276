#!/bin/sh
# A backend that corrupts the ring (response ids never sent, a response
# twice, the wrong operation, a response producer past the requests) is
# caught: xbd-front reports a protocol error and exits 1 promptly, without
# crashing, hanging or reporting the I/O as done.
. "$top_srcdir/tests/blkfront/testback-lib.sh"
tb_setup

for mode in bad-id dup-id bad-op rsp-prod; do
	xs write "$BE/state" 1 || fail "cannot reset backend state"
	: >"$WORK/testback.log"
	tb_start --evil "$mode" --after 4
	out=$("$ASDOM" "$DOMU" timeout 30 "$XBD_FRONT" bench --vdev xvdb --rw randrw --iodepth 4 \
		--runtime 2 --verify --timeout 2 2>&1)
	rc=$?
	echo "--- $mode: exit $rc"
	echo "$out"
	[ $rc -eq 1 ] || fail "$mode: xbd-front exited $rc, expected 1 (124 = hang, >128 = crash)"
	echo "$out" | grep -q 'disconnecting' || fail "$mode: no protocol error reported"
	echo "$out" | grep -q 'verify: 0 mismatches' || fail "$mode: data mismatch reported as success"
	kill "$TB_PID" 2>/dev/null
	wait "$TB_PID" 2>/dev/null
done
exit 0
