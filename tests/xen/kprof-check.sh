#!/bin/sh
# tests/xen/kprof-check.sh: tests/xen/kprof.py (COUNT_PROF=1's profile of
# dom0's kernel by function) sums the plugin's prof= blocks between each
# job's two cuts, on dom0's CPUs only, over the counted rounds (not the
# traced one), names them from dom0's kallsyms (modules' with their
# [module], Xen's as one line), keeps spinning blocks apart and divides by
# the rounds' I/Os; with --counts (the cuts' times), also less what the
# backend's idle job ran a second, over the job's time.  A serial log, a
# profile, the cuts' times and a kallsyms made here.
. "$top_srcdir/tests/lib/sim.sh"

command -v python3 >/dev/null || skip "no python3 (the script runs on the host of make check-xen)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-kprof.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
r() {  # BACKEND ROUND IOS M0 M1: a count step's result line
	printf 'XBDT-RESULT backend=%s run=c-pers1 job=rand4k32 round=%s rc=0 iops=1 bw_kib=1 ios=%s verify=- dcpu=1 dus=1 p50=1 p99=1 sys=- m0=%s m1=%s girq=1 ctxt=1 pgf=0 bntf=1 forks=0\r\n' "$@"
}
{
	printf '[    1.0] XBDT-COUNTING dom0_cpus=0-1 guest_cpus=2 rounds=2 trace=1 arch=aarch64\r\n'
	printf 'XBDT-RESULT backend=xbd run=c-pers1 job=idle round=- rc=0 iops=0 bw_kib=0 ios=0 verify=- dcpu=0 dus=0 p50=- p99=- sys=- m0=1 m1=2 girq=0 ctxt=0 pgf=0 bntf=0 forks=0\r\n'
	r xbd 1 1 3 4; r xbd 2 1 5 6; r xbd t 1 7 8; r blkback 1 2 257 258
} >"$WORK/serial.log"
# VADDR W INSNS SPIN D0 D1 D2 D3 (what each block ran since the cut before)
cat >"$WORK/prof.txt" <<'P'
cut 1
0xffff000000001010 k 3 0 99999 0 0 0
cut 2
0xffff000000001010 k 3 0 500 100 0 0
0x200000 x 3 0 200 0 0 0
cut 3
0xffff000000001010 k 3 0 500 0 0 0
cut 65500
0xffff000000001010 k 3 0 1000 1000 9999 0
0xffff000000002000 k 3 1 600 0 0 0
0x200000 x 3 0 2000 0 0 0
cut 4
0xffff000000003000 k 3 0 3000 0 0 0
cut 5
cut 6
0xffff000000001010 k 3 0 4000 0 0 0
cut 7
cut 8
0xffff000000001010 k 3 0 777777 0 0 0
cut 257
cut 258
0xffff000000003008 k 3 0 4000 4000 0 0
P
# the cuts' times (host ns): the idle job 1 s (600 kernel and 200 Xen instructions: 600 and 200 a
# second), xbd's rounds 2 s and 1 s
printf 'cut %s 2 %s 2 10 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n' 1 5000000000 2 6000000000 3 10000000000 4 12000000000 5 20000000000 6 21000000000 \
	7 30000000000 8 31000000000 257 40000000000 258 41000000000 >"$WORK/counts.txt"
printf 'ffff000000001000 T foo\nffff000000002000 t spinner\nffff000000003000 t bar\t[xen_blkback]\nffff000000004000 d data\n' >"$WORK/kallsyms"
python3 "$top_srcdir/tests/xen/kprof.py" "$WORK/serial.log" "$WORK/prof.txt" "$WORK/kallsyms" >"$WORK/out" 2>&1 ||
	fail "kprof.py failed: $(cat "$WORK/out")"
cat "$WORK/out"
# xbd: rounds 1 and 2, 2 I/Os: foo 2000 + 4000 (CPU 2 is the guest's, round t is left out),
# spinner's 600 as spinning, bar 3000, Xen 2000; blkback: bar 8000 over 2 I/Os
row() { grep -a "^  $1 " "$WORK/out" | head -1 | awk '{ $1 = ""; print }' | sed 's/^ *//'; }
[ "$(row foo)" = "3.000 0.000 0.000 0.000 3.000" ] || fail "foo: $(row foo), not 6000 instructions over 2 I/Os for xbd alone"
[ "$(row 'bar \[xen_blkback\]' | sed 's/^\[xen_blkback\] //')" = "1.500 0.000 4.000 0.000 -2.500" ] ||
	fail "bar [xen_blkback]: $(row 'bar \[xen_blkback\]')"
[ "$(row spinner)" = "0.000 0.300 0.000 0.000 0.000" ] && grep -a -q "^  xbd *kernel *4.50 k (+ 0.30 k spinning), Xen *1.00 k (+ 0.00 k spinning), 2 I/Os" "$WORK/out" ||
	fail "the spinning block or the totals: $(grep -a -e spinner -e 'kernel ' "$WORK/out")"
grep -a -q "^  (Xen) *1.000 *0.000 *0.000 *0.000 *1.000" "$WORK/out" || fail "Xen's line: $(grep -a '(Xen)' "$WORK/out")"
grep -a -q "^  \[xen_blkback\] *1.500 *0.000 *4.000 *0.000 *-2.500" "$WORK/out" || fail "the module table: $(cat "$WORK/out")"
# --counts: xbd less 600 and 200 a second over its 3 s, a I/O: kernel 4.5 - 0.9, Xen 1.0 - 0.3;
# blkback has no idle job, so no such line
python3 "$top_srcdir/tests/xen/kprof.py" "$WORK/serial.log" "$WORK/prof.txt" "$WORK/kallsyms" --counts "$WORK/counts.txt" \
	>"$WORK/out3" 2>&1 || fail "kprof.py --counts failed: $(cat "$WORK/out3")"
grep -a -q "less the idle job's 1 k and 0 k a second over the job's 3.00 s: kernel *3.60 k, Xen *0.70 k" "$WORK/out3" ||
	fail "--counts: xbd's line less the idle job: $(grep -a -A1 'xbd *kernel' "$WORK/out3")"
[ "$(grep -a -c "less the idle job" "$WORK/out3")" = 1 ] || fail "--counts: a line less an idle job that blkback has not: $(cat "$WORK/out3")"
# nothing to profile: one clear line and exit 1
: >"$WORK/empty"
python3 "$top_srcdir/tests/xen/kprof.py" "$WORK/serial.log" "$WORK/empty" "$WORK/kallsyms" >"$WORK/out2" 2>&1 &&
	fail "an empty profile passed: $(cat "$WORK/out2")"
grep -q "nothing to profile" "$WORK/out2" || fail "an empty profile did not say so: $(cat "$WORK/out2")"
exit 0
