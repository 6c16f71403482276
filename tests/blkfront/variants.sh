#!/bin/sh
# xbd-front check passes against xbd-back offering less or otherwise:
# barrier instead of flush-cache (flush and FUA become WRITE_BARRIER, a FUA
# write one request), no
# persistent grants, single page / single queue / no indirect, grant copy,
# and a read-only-to-the-toolstack discard-enable=0.
. "$top_srcdir/tests/blkfront/front-lib.sh"
front_need

run_variant() {
	name=$1 want=$2
	shift 2
	BACK_OPTS="$*"
	(
		front_setup --discard-enable 0
		out=$("$ASDOM" "$DOMU" "$XBD_FRONT" check --vdev xvdb 2>&1)
		rc=$?
		echo "=== $name (xbd-back $BACK_OPTS)"
		echo "$out" | grep -v '^ok '
		[ $rc -eq 0 ] || { echo "$out"; bk_fail "$name: xbd-front check exited $rc"; }
		echo "$out" | grep -q "$want" || { echo "$out"; bk_fail "$name: no line matching '$want'"; }
		echo "$out" | grep -q '^ok   .*discard not offered: refused' ||
			bk_fail "$name: discard-enable=0 not honoured"
		if [ "$name" = barrier ]; then
			# a FUA write is one WRITE_BARRIER carrying the data, no separate flush
			json=$("$ASDOM" "$DOMU" "$XBD_FRONT" bench --vdev xvdb --rw randwrite --iodepth 4 \
				--runtime 0.3 --fua --verify --json 2>&1) || bk_fail "barrier: bench --fua failed: $json"
			echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["writes"] > 0 and r["errors"] == 0 and r["ring_requests"] == r["writes"], r
' || bk_fail "barrier: FUA writes were not single barrier requests: $json"
		fi
	) || exit 1
}

run_variant barrier '^ok   \[default\] flush after write: WRITE_BARRIER' --barrier --max-indirect-segs 0
run_variant minimal '^ok   \[default\] attach: .* 1 queue(s), ring order 0, per-request grants, 0 indirect' \
	--persistent 0 --max-ring-order 0 --max-queues 1 --max-indirect-segs 0
run_variant grant-copy '^ok   \[default\] largest indirect request (256 segments)' --grant-copy
exit 0
