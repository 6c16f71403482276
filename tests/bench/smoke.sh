#!/bin/sh
# make bench, end to end and small: two rows on the null engine and the
# QD1 row on the disk file (the engine pair uring/aio and the system call
# counts, where the build has uring and strace is installed), one short
# sweep.  The table, results.json (with the CPU model, the date and the
# backend's counters) and the chart must come out, with real figures for
# both fio and xbd: this catches the harness losing track of the output
# formats of xbd-back, xbd-front or fio.
. "$top_srcdir/tests/lib/sim.sh"
sim_need sim/xbd-sim xenstore/xbd-xenstored blkback/xbd-back blkfront/xbd-front
command -v python3 >/dev/null || skip "python3 not installed"
command -v fio >/dev/null || skip "fio not installed"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/xbd-bench-test.XXXXXXXX") || fail "mktemp"
trap 'rm -rf "$OUT"' EXIT
BENCH_ONLY=rr1:null,rr32:null,rr1:disk,idle BENCH_RUNTIME=0.2 BENCH_REPEAT=1 BENCH_SIZE_MB=8 \
	BENCH_PIN=0 BENCH_DISK_DIR="$OUT" \
	python3 "$top_srcdir/bench/run.py" --builddir "$top_builddir" --out "$OUT" \
	>"$OUT/stdout" 2>"$OUT/stderr"
rc=$?
cat "$OUT/stdout"
[ $rc -eq 0 ] || { cat "$OUT/stderr"; fail "bench/run.py exited $rc"; }
grep -q '^4k randread QD32  null' "$OUT/stdout" || fail "no QD32 row in the table"
grep -q "bench: results $OUT/results.json" "$OUT/stdout" || fail "results.json not announced"
awk 'length > 100 { exit 1 }' "$OUT/table.txt" || fail "table wider than 100 columns"
have_uring=False
"$top_builddir/blkback/xbd-back" --check-config --control none --disk "x:engine=uring" \
	>/dev/null 2>&1 && have_uring=True
have_strace=False
command -v strace >/dev/null 2>&1 && have_strace=True
HAVE_URING=$have_uring HAVE_STRACE=$have_strace python3 - "$OUT/results.json" <<'PY' || { cat "$OUT/stderr"; fail "results.json is wrong"; }
import json, os, sys
HAVE_URING = os.environ["HAVE_URING"] == "True"
HAVE_STRACE = os.environ["HAVE_STRACE"] == "True"
r = json.load(open(sys.argv[1]))
assert r["machine"]["cpu_model"] and r["machine"]["date"], r["machine"]
rows = {(x["workload"], x["target"]): x for x in r["rows"]}
assert set(rows) == {("rr1", "null"), ("rr32", "null"), ("rr1", "disk")}, rows.keys()
d1 = rows[("rr1", "disk")]["configs"]
if HAVE_URING:
    assert d1["uring"].get("iops", 0) > 0 and rows[("rr1", "disk")]["ab"]["uring"]["median"] > 0, d1
    if HAVE_STRACE:
        assert d1["xbd-sys"]["syscalls_per_req"] > 0 and d1["uring-sys"]["syscalls_per_req"] > 0, d1
q32 = rows[("rr32", "null")]
for c in ("fio", "xbd", "batch1", "nopers", "copy"):
    assert q32["configs"][c].get("iops", 0) > 0, (c, q32["configs"][c])
x = q32["configs"]["xbd"]
assert x["mean_batch"] >= 1 and x["ntf_out_per_req"] >= 0 and x["back_cpu_us_per_req"] > 0, x
assert q32["configs"]["batch1"]["mean_batch"] == 1, q32["configs"]["batch1"]
assert q32["ab"]["batch"]["median"] > 0 and rows[("rr1", "null")]["ab"]["poll"]["median"] > 0
assert any(t["what"].startswith("mean io_submit batch") for t in r["targets"])
PY
if command -v gnuplot >/dev/null; then
	[ -s "$OUT/chart.png" ] || fail "no chart.png"
fi
exit 0
