#!/bin/sh
# tests/xen/ilv-table-check.sh: tests/xen/ilv-table.py (the side-by-side
# runs of make check-xen, summed on the host) takes medians over the
# rounds and the ratio to kernel blkback round by round, and fails a run
# whose cost reads 0 for work that was done.  A serial log made here.
. "$top_srcdir/tests/lib/sim.sh"

command -v python3 >/dev/null || skip "no python3 (the script runs on the host of make check-xen)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-ilv.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
T=$top_srcdir/tests/xen/ilv-table.py
r() {  # BACKEND JOB ROUND IOPS DUS XUS P50 [IOS]
	printf 'XBDT-RESULT backend=%s run=ilv job=%s round=%s rc=0 iops=%s bw_kib=1 ios=%s verify=- bcpu=1 dcpu=1 bus=1 dus=%s p50=%s p99=1 xcpu=1 xus=%s sys=-\r\n' \
		"$1" "$2" "$3" "$4" "${8:-5000}" "$5" "$7" "$6"
}
{
	echo "noise before"
	r blkback verify - 100 10 10 -; r xbd verify - 100 10 10 - | sed 's/verify=-/verify=ok/'
	# three rounds; round 3 ran on a slowed host (both backends 4x the cost)
	r blkback rand4k 1 500 100 200 -;  r xbd rand4k 1 600 50 100 -
	r blkback rand4k 2 520 110 220 -;  r xbd rand4k 2 610 66 110 -
	r blkback rand4k 3 130 400 800 -;  r xbd rand4k 3 150 240 400 -
	r blkback qd1 1 300 900 1000 2000; r xbd qd1 1 320 800 900 1800
	r blkback qd1 2 310 950 1000 2100; r xbd qd1 2 330 850 950 2520
	r blkback qd1 3 100 990 1000 8000; r xbd qd1 3 90 990 1000 4000
	# another run's line: not this table's
	echo 'XBDT-RESULT backend=xbd run=std job=rand4k rc=0 iops=1 ios=5000 dus=0 xus=0'
} >"$WORK/serial.log"
python3 "$T" "$WORK/serial.log" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "ilv-table.py failed on a good log"; }
cat "$WORK/out"
row() { grep -E "^  $1 +$2 " "$WORK/out"; }
# xbd's rand4k: medians 600 IOPS, 66 us/IO; ratios per round 0.50 0.60 0.60 -> median 0.60
row xbd rand4k | grep -q ' 3 *600 *66 *110 *- *0\.60 \[0\.50\.\.0\.60\]' ||
	fail "xbd rand4k: medians or per-round ratio wrong: $(row xbd rand4k)"
# p50 ratios 0.90 1.20 0.50 -> 0.90 [0.50..1.20]
row xbd qd1 | grep -q '0\.90 \[0\.50\.\.1\.20\] *$' || fail "xbd qd1 p50 vs bb wrong: $(row xbd qd1)"
row blkback qd1 | grep -q ' 2100 ' || fail "blkback qd1 p50 median wrong: $(row blkback qd1)"
grep -q 'verify: blkback -, xbd ok' "$WORK/out" || fail "the verify outcomes are not shown"
grep -q 'run=std' "$WORK/out" && fail "another run's line was taken"
# a job with thousands of I/Os that cost dom0 nothing: the table says so and fails
r xbd seq128k 1 100 0 0 - >>"$WORK/serial.log"
r blkback seq128k 1 100 10 10 - >>"$WORK/serial.log"
python3 "$T" "$WORK/serial.log" >"$WORK/out2" 2>&1 && fail "a 0 cost for 5000 I/Os passed"
grep -q 'ERROR: xbd seq128k round 1' "$WORK/out2" || fail "no error line for the 0 cost: $(cat "$WORK/out2")"
# a log without side-by-side runs prints nothing and passes
echo "XBDT-STEP x PASS -/pv y" >"$WORK/none.log"
[ -z "$(python3 "$T" "$WORK/none.log")" ] || fail "output for a log without ilv runs"
exit 0
