#!/bin/sh
# tests/xen/cost-table-check.sh: tests/xen/cost-table.py (the count
# step's counted table, summed on the host) cuts the plugin's counts at
# each job's marks into instructions per I/O on dom0's CPUs and the
# guest's, takes the transitions from the traced round's xentrace file,
# medians over the rounds, flags a window that holds the harness's own
# work, fails a job that counted nothing, a missing cut and a passed
# bound, and --compare finds the cells that moved more than 5% between
# two boots.  A serial log, the plugin's counts and a trace made here.
. "$top_srcdir/tests/lib/sim.sh"

command -v python3 >/dev/null || skip "no python3 (the script runs on the host of make check-xen)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-cost.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
T=$top_srcdir/tests/xen/cost-table.py
mkdir -p "$WORK/logs"
r() {  # BACKEND RUN JOB ROUND IOS M0 [MORE]: a count step's result line
	printf 'XBDT-RESULT backend=%s run=%s job=%s round=%s rc=0 iops=900 bw_kib=1 ios=%s verify=- dcpu=1 dus=50 p50=300 p99=1 sys=%s m0=%s m1=%s girq=%s ctxt=%s pgf=0 bntf=%s%s\r\n' \
		"$1" "$2" "$3" "$4" "$5" "${8:--}" "$6" $(($6 + 1)) $(($5 / 2)) "$5" "$5" "${7:-}"
}
# c MARK NS CPU0 CPU1 GUEST [POLL0]: a cut line, dom0 on CPUs 0-1, the guest on 2;
# each CPU's count a quarter in Xen's code, a quarter in a kernel's, half in user space's,
# a tenth of it spinning
c() { echo "cut $1 2 $2 3 7 $(for n in "$3 ${6:-0}" "$4 0" "$5 0"; do set -- $n; printf '%s %s 0 %s %s %s %s ' $1 $2 $(($1 / 4)) $(($1 / 4)) $(($1 / 2)) $(($1 / 10)); done)"; }
{ echo "XBDT-COUNTING dom0_cpus=0-1 guest_cpus=2 rounds=2 trace=1"; echo "XBDT-SYSCOUNT mark=65510 calls=1000"; } >"$WORK/serial.log"
{
	# another run's line: not the table's
	echo "XBDT-RESULT backend=xbd run=std job=rand4k round=- rc=0 iops=1 ios=5000 m0=1 m1=2"
	r blkback c-pers1 rand4k32 1 10000 1;  r blkback c-pers1 rand4k32 2 10000 3
	r xbd c-pers1 rand4k32 1 10000 11 " xpolln=5";     r xbd c-pers1 rand4k32 2 10000 13
	r xbd c-pers1 rand4k32 t 5000 15 " scid=232:10000+16:20000+228:10000" 40000
	r xbd c-pers1 idle 1 0 21
	# a job whose second cut is missing
	r xbd c-pers1 qd1 1 2000 31
} >>"$WORK/serial.log"
{
	# blkback: dom0 1e9 and 1.2e9 over two rounds of 10000 I/Os (100k, 120k), the guest 5e8 each
	c 1 1000000000 0 0 0;                      c 2 2000000000 600000000 400000000 500000000
	c 3 3000000000 600000000 400000000 500000000; c 4 4000000000 1200000000 1000000000 1000000000
	# xbd: 8e8 (80k a I/O; 2e8 of it polling) and 9e8 (90k);
	# dom0's harness mark inside round 2's window
	c 11 5000000000 0 0 0;  c 12 6000000000 500000000 300000000 400000000 200000000
	c 13 7000000000 0 0 0
	echo "cut 65500 0 7500000000 3 7 1 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
	c 14 8000000000 450000000 450000000 400000000
	c 15 9000000000 0 0 0;  c 16 9100000000 1 1 1
	# idle: 2 s, 1e7 instructions on dom0's CPUs
	c 21 10000000000 0 0 0; c 22 12000000000 5000000 5000000 0
	c 31 13000000000 0 0 0
	# 1000 system calls: 4e6 instructions on dom0's CPUs, 4000 each (1000 Xen's, 1000 the kernel's, 2000 user's)
	c 65510 14000000000 0 0 0; c 65511 14100000000 3000000 1000000 9999999
} >"$WORK/counts.txt"
python3 - "$WORK/logs/xtc-xbd-c-pers1-rand4k32.bin" <<'PY' || fail "cannot write the trace"
import struct, sys
def rec(ev, words):
    return struct.pack("<I", ev | (len(words) << 28)) + struct.pack("<%dI" % len(words), *words)
SWITCH, HC, SUB = 0x0002800a, 0x0020100d, 0x0020200e
ARG32 = lambda i: 1 << (20 + 2 * i)
# dom0: 2 grant copies of 8 operations each, a multicall holding an mmuext_op of 3 and a
# grant map of 1 and an unmap of 2, an event channel send; then the guest (domid 7): 4 sends
body = (rec(SWITCH, [32767, 0, 0, 0]) +
        rec(HC, [20 | ARG32(0) | ARG32(2), 5, 8]) + rec(HC, [20 | ARG32(0) | ARG32(2), 5, 8]) +
        rec(HC, [13 | ARG32(1), 3]) + rec(SUB, [26 | ARG32(1), 3]) +
        rec(SUB, [20 | ARG32(0) | ARG32(2), 0, 1]) + rec(SUB, [20 | ARG32(0) | ARG32(2), 1, 2]) +
        rec(HC, [32]) + rec(SWITCH, [0, 0, 7, 0]) + rec(HC, [32]) * 4)
open(sys.argv[1], "wb").write(rec(0x0001f003, [0, len(body)]) + body)
PY
echo 2 >"$WORK/logs/xtc-xbd-c-pers1-rand4k32.ios"
echo "xbd c-pers1 7" >"$WORK/logs/count-guests.txt"
python3 "$T" "$WORK/serial.log" "$WORK/counts.txt" "$WORK/logs" --json "$WORK/a.json" >"$WORK/out" 2>&1
rc=$?
cat "$WORK/out"
[ $rc = 1 ] || fail "a job with a missing cut passed (exit $rc)"
grep -q 'ERROR: xbd c-pers1 qd1 round 1: no cut' "$WORK/out" || fail "the missing cut is not named"
row() { grep -E "^  $1 +$2 +$3 " "$WORK/out"; }
# blkback: medians 110.0k dom0 (100k, 120k: spread 20%) of which 27.5k Xen's, 27.5k the kernel's,
# 55k user space's, 10% spinning (99.0k without), 50.0k guest
row blkback c-pers1 rand4k32 | grep -q ' 2 *110\.0 *27\.5 *27\.5 *55\.0 *0 *10 *99\.0 *- *20\.0% *- *50\.0 |' ||
	fail "blkback rand4k32: medians or spread wrong: $(row blkback c-pers1 rand4k32)"
# xbd: 80k and 90k -> 85.0k (76.5k without spinning), 0.77 of blkback's; polling 2e8 of 8e8 and 0 of 9e8 -> 12%;
# the idle job's 5e6 a second over each 1 s window: 0.6% of dom0's count
row xbd c-pers1 rand4k32 | grep -q ' 2 *85\.0 *21\.2 *21\.2 *42\.5 *12 *10 *76\.5 *1 *12\.5% *0\.77 *40\.0 |' ||
	fail "xbd rand4k32: medians, polling or ratio wrong: $(row xbd c-pers1 rand4k32)"
# the traced round: 4 hypercalls (the multicall's subcalls not among them) in 2 I/Os, 8 grant copies,
# map 0.5, unmap 1, mmuext 1.5, the guest's 4 sends 2.00, 40000 system calls over 5000 I/Os
row xbd c-pers1 rand4k32 | grep -q '| *2.00 *0.50 *1\.00 *8\.00 *1\.50 *2\.00 *8\.00 ' ||
	fail "xbd rand4k32: the traced round's transitions wrong: $(row xbd c-pers1 rand4k32)"
row xbd c-pers1 rand4k32 | grep -q 'harness work in the window' || fail "the harness mark in a window is not flagged"
row blkback c-pers1 rand4k32 | grep -q 'harness' && fail "blkback's windows flagged"
# the traced round's calls by name: 40000 over 5000 I/Os, ioctl 4, epoll_wait and clock_gettime 2 each
grep -q '^  xbd c-pers1 rand4k32 *ioctl=4.00 \(epoll_wait=2.00 clock_gettime=2.00\|clock_gettime=2.00 epoll_wait=2.00\)$' "$WORK/out" ||
	fail "the system calls by name are wrong or missing: $(grep -A3 'by name' "$WORK/out")"
# on arm64 (dom0's arch=aarch64) the numbers are the generic table's: 2 io_submit, 63 read, 113 clock_gettime
sed 's/^\(XBDT-COUNTING .*\)$/\1 arch=aarch64/; s/scid=232:10000+16:20000+228:10000/scid=2:10000+63:20000+113:10000/' \
	"$WORK/serial.log" >"$WORK/arm.log"
grep -q 'scid=2:10000+63:20000+113:10000' "$WORK/arm.log" && grep -q 'arch=aarch64' "$WORK/arm.log" || fail "the arm64 log was not made"
python3 "$T" "$WORK/arm.log" "$WORK/counts.txt" >"$WORK/out-arm" 2>&1
grep -q '^  xbd c-pers1 rand4k32 *read=4.00 \(io_submit=2.00 clock_gettime=2.00\|clock_gettime=2.00 io_submit=2.00\)$' "$WORK/out-arm" ||
	fail "arm64's system calls are not named by arm64's numbers: $(grep -A3 'by name' "$WORK/out-arm")"
# (a tenth of each CPU's count spinning: 400 of the 4000)
grep -q 'one system call in dom0 (getppid, .*): 4000 instructions .*(Xen 1000, kernel 1000, user 2000); 400 of them spinning' "$WORK/out" ||
	fail "the cost of one system call is wrong or missing: $(grep 'system call' "$WORK/out")"
# the plugin's 10 counts a CPU split spinning by where it lies (here all of it in Xen's code):
# xen/kern/user then leave it out and add up to net-k (blkback: 27.5 - 11.0, 27.5, 55.0 = 99.0)
awk '$1 == "cut" { o = $1 " " $2 " " $3 " " $4 " " $5 " 10"; for (c = 0; c < $5; c++) { b = 7 + c * 7
	for (i = b; i < b + 7; i++) o = o " " $i; o = o " " $(b + 6) " 0 0" } print o; next } { print }' \
	"$WORK/counts.txt" >"$WORK/counts10.txt"
grep -q '^cut 2 2 2000000000 3 10 600000000 0 0 150000000 150000000 300000000 60000000 60000000 0 0 ' "$WORK/counts10.txt" ||
	fail "the 10-count lines were not made: $(grep '^cut 2 ' "$WORK/counts10.txt")"
python3 "$T" "$WORK/serial.log" "$WORK/counts10.txt" >"$WORK/out10" 2>&1
grep -E '^  blkback +c-pers1 +rand4k32 ' "$WORK/out10" | grep -q ' 2 *110\.0 *16\.5 *27\.5 *55\.0 *0 *10 *99\.0 ' ||
	fail "spinning split by where is not left out of xen/kern/user: $(grep -E '^  blkback +c-pers1 +rand4k32 ' "$WORK/out10")"
grep -q 'spin-waits left out: they add up to net-k' "$WORK/out10" || fail "the legend does not say xen/kern/user are net"
grep -q 'spin-waits left out: they add up' "$WORK/out" && fail "the legend says xen/kern/user are net for 7-count lines"
# idle: 1e7 in 2 s -> 5000.0 thousand a second
row xbd c-pers1 idle | grep -q ' 1 *5000\.0 ' || fail "idle per second wrong: $(row xbd c-pers1 idle)"
# a bound xbd-back's rand4k32 passes (76.5k > 75k) fails, one it keeps does not
python3 "$T" "$WORK/serial.log" "$WORK/counts.txt" --bound "rand4k32=75000" 2>&1 | grep -q "past the bound" ||
	fail "a passed bound is not reported"
grep -v 'job=qd1' "$WORK/serial.log" >"$WORK/good.log"
python3 "$T" "$WORK/good.log" "$WORK/counts.txt" --bound "rand4k32=90000" >/dev/null ||
	fail "a kept bound failed"
# a job of 10000 I/Os that counted nothing on dom0's CPUs fails
awk '$1 == "cut" && $2 == 14 { $7 = $10 = $11 = $12 = $13 = 0; $14 = $17 = $18 = $19 = $20 = 0 } { print }' "$WORK/counts.txt" >"$WORK/zero.txt"
grep -q '^cut 14 2 8000000000 3 7 0 0 0 0 0 0 0 0 0 0 0 0 0 0 ' "$WORK/zero.txt" || fail "the zero count's counts were not made"
python3 "$T" "$WORK/good.log" "$WORK/zero.txt" >"$WORK/out2" 2>&1 && fail "a job that counted nothing passed"
grep -q 'ERROR: xbd c-pers1 rand4k32 round 2: 10000 I/Os and 0 instructions' "$WORK/out2" ||
	fail "the zero count is not named: $(cat "$WORK/out2")"
# --compare: the same boot twice is within 5%; one whose dom0 count moved 10% is not
python3 "$T" --compare "$WORK/a.json" "$WORK/a.json" >"$WORK/cmp1" || fail "a boot against itself differs: $(cat "$WORK/cmp1")"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d["xbd c-pers1 rand4k32"]["d0_k"] *= 1.1
json.dump(d, open(sys.argv[2], "w"))' "$WORK/a.json" "$WORK/b.json"
python3 "$T" --compare "$WORK/a.json" "$WORK/b.json" >"$WORK/cmp2" && fail "a 10% move passed the comparison"
grep -q 'xbd c-pers1 rand4k32 *d0_k .*10\.0%\*' "$WORK/cmp2" || fail "the moved cell is not marked: $(cat "$WORK/cmp2")"
# a log without count runs prints nothing and passes
echo "XBDT-STEP x PASS -/pv y" >"$WORK/none.log"
[ -z "$(python3 "$T" "$WORK/none.log" "$WORK/counts.txt")" ] || fail "output for a log without count runs"
exit 0
