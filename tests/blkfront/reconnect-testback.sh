#!/bin/sh
# The backend goes away with requests unanswered: once by restarting (back
# to InitWait), once through Closing/Closed, and once restarting without
# the features it had (indirect segments, flush): xbd-front negotiates
# again, resubmits what was in flight (cut to the new segment limit), and
# the verified run ends with no error, no mismatch and nothing completed
# twice.
. "$top_srcdir/tests/blkfront/testback-lib.sh"
tb_setup

run() {
	name=$1 tbopts=$2 benchopts=$3
	xs write "$BE/state" 1 || fail "cannot reset backend state"
	: >"$WORK/testback.log"
	# shellcheck disable=SC2086 # option lists
	tb_start $tbopts
	# shellcheck disable=SC2086
	out=$("$ASDOM" "$DOMU" timeout 60 "$XBD_FRONT" bench --vdev xvdb --rw randrw --iodepth 8 \
		--runtime 1.5 --verify $benchopts 2>&1)
	rc=$?
	echo "--- $name: exit $rc"
	echo "$out"
	cat "$WORK/testback.log"
	[ $rc -eq 0 ] || fail "$name: bench across the backend going away exited $rc"
	grep -q "dropped" "$WORK/testback.log" || fail "$name: testback never went away"
	echo "$out" | grep -q 'verify: 0 mismatches' || fail "$name: verify mismatches"
	echo "$out" | grep -q 'errors: 0$' || fail "$name: I/O errors"
	echo "$out" | grep -q 'completed twice' && fail "$name: a request completed twice"
	echo "$out" | grep -q 'reconnects: [1-9]' || fail "$name: no reconnect seen"
	echo "$out" | grep -q 'resubmitted: [1-9]' || fail "$name: nothing resubmitted"
	wait "$TB_PID"
}

run restart "--restart-after 300" "--bs 8k"
run close "--close-after 300" "--bs 8k"
run fewer-features "--indirect 64 --drop-features --restart-after 100" "--bs 256k --iodepth 4"
echo "$out" | grep -q 'ring requests: .* ([1-9][0-9]* indirect)' ||
	fail "fewer-features: no indirect requests before the restart"
exit 0
