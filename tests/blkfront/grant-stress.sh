#!/bin/sh
# Grant budget under concurrent submitters: 4 threads submit 1 MiB writes
# at the same moment, round after round, against indirect=256 and the
# default budget (768 grants over 2 queues: one 257-page request per
# queue at a time), with persistent grants and without.  Every round must
# drain (the wait list used to strand: all I/O stopped with the pool's
# pages held by a request queued behind one waiting for them), the
# library's accounting must be whole after each (xbd_front_selfcheck),
# and the data read back must be the last round's.
. "$top_srcdir/tests/blkfront/front-lib.sh"
front_setup
STRESS="$top_builddir/tests/blkfront/grant-stress"
[ -x "$STRESS" ] || skip "grant-stress is not built"

for p in 1 0; do
	out=$("$ASDOM" "$DOMU" timeout -k 5 120 "$STRESS" --vdev xvdb --threads 4 --depth 2 --rounds 60 \
		--queues 2 --indirect 256 --persistent $p --timeout 5 2>&1)
	rc=$?
	echo "$out"
	[ $rc -eq 0 ] || bk_fail "grant-stress --persistent $p failed ($rc)"
done
# a budget so small (24 pages a queue) that requests are cut to 23 segments
out=$("$ASDOM" "$DOMU" timeout -k 5 120 "$STRESS" --vdev xvdb --threads 4 --depth 2 --rounds 20 \
	--queues 2 --max-grants 48 --timeout 5 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || bk_fail "grant-stress --max-grants 48 failed ($rc)"
exit 0
