#!/bin/sh
# tests/xen/xentrace-sum-check.sh: tests/xen/xentrace-sum.py (the profile
# step's xentrace files, summed on the host) counts what it should.  A
# trace made here in xentrace's format: two CPUs' chunks, records of the
# idle domain, of dom0 and of a guest on one CPU, switched between by
# TRC_SCHED_SWITCH records; only dom0's may count, per I/O, and the time
# between dom0's records goes to their pair.
. "$top_srcdir/tests/lib/sim.sh"

command -v python3 >/dev/null || skip "no python3 (the script runs on the host of make check-xen)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-xts.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
python3 - "$WORK/trace.bin" <<'PY' || fail "cannot write the trace"
import struct, sys

def rec(ev, words, tsc=None):
    hdr = ev | (len(words) << 28) | ((1 << 31) if tsc is not None else 0)
    b = struct.pack("<I", hdr)
    if tsc is not None:
        b += struct.pack("<Q", tsc)
    return b + struct.pack("<%dI" % len(words), *words)

SWITCH, HC, FAULT, FPU, BLOCK = 0x0002800a, 0x0020100d, 0x00201104, 0x00201008, 0x00028006
# CPU 0: idle -> dom0 (iret, iret, sched_op, a fault) -> dom5 (an iret not dom0's)
cpu0 = (rec(SWITCH, [32767, 0, 0, 1], 1000) + rec(HC, [23], 1100) + rec(HC, [23], 1400) +
        rec(HC, [29 | (1 << 20), 1], 1500) + rec(FAULT, [1, 2, 3], 1600) +
        rec(BLOCK, [0, 1], 1650) + rec(SWITCH, [0, 1, 5, 0], 1700) + rec(HC, [23], 1800))
# CPU 1: a record before any switch (domain unknown: not counted), then dom0's FPU restore and an iret
cpu1 = (rec(HC, [23], 50) + rec(SWITCH, [32767, 1, 0, 0], 2000) + rec(FPU, [], 2100) +
        rec(HC, [23], 2400))
data = b""
for cpu, chunk in ((0, cpu0), (1, cpu1)):
    data += rec(0x0001f003, [cpu, len(chunk)]) + chunk
open(sys.argv[1], "wb").write(data)
PY
out=$(python3 "$top_srcdir/tests/xen/xentrace-sum.py" "$WORK/trace.bin" 2 0) ||
	fail "xentrace-sum.py failed: $out"
echo "$out"
first=$(echo "$out" | sed -n 1p)
# dom0: 3 irets and a sched_op in 2 I/Os; the guest's iret and the unknown one are not its
case $first in
"hypercalls=2.00 iret=1.50 sched_op=0.50 |"*) ;;
*) fail "dom0's hypercalls miscounted: $first" ;;
esac
for want in "faults=0.50" "fpu=0.50" "switched-in=1.00" "blocks=0.50"; do
	case $first in *" $want"*) ;; *) fail "expected $want in: $first" ;; esac
done
# time: CPU 0 700 cycles (1000..1700), CPU 1 400 (2000..2400): 550 a I/O;
# the pair iret>iret holds 300 of the 1100 (27%), fpu>iret 300 (27%)
second=$(echo "$out" | sed -n 2p)
case $second in
"time: 0.00 Mcycles/IO;"*" iret>iret 27%"*) ;;
*) fail "dom0's time miscounted: $second" ;;
esac
case $second in *" fpu>iret 27%"*) ;; *) fail "the FPU restore's pair is missing: $second" ;; esac
python3 "$top_srcdir/tests/xen/xentrace-sum.py" "$WORK/trace.bin" 0 0 2>/dev/null &&
	fail "no I/O to count against was not refused"
exit 0
