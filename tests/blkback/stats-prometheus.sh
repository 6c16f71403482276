#!/bin/sh
# `xbdctl stats --format prometheus`: after exactly known I/O (rawfront's
# "counted"), promtool (Debian's prometheus package) accepts the output
# with no lint complaint, the samples carry the counts, bytes and latency
# histograms with labels domain/device/ring, a params with a quote and a
# backslash is escaped, and xbd-back-metrics.service's command writes the
# same metrics into a textfile directory (and removes them when the
# daemon does not answer).
. "$top_srcdir/tests/blkback/common.sh"
command -v promtool >/dev/null 2>&1 || skip "promtool not installed (Debian's prometheus package; scripts/install-deps.sh)"

dom=$(new_domain)
img="$WORK/we\"ird\\disk.img"
new_disk "$img" 16M
CTL=$WORK/ctl.sock
ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}
start_back --types vbd --control "$CTL" --poll-max-ns 0
sim_wait_for 10 test -S "$CTL" || bk_fail "no control socket $CTL"
a=$(add_disk "$dom" xvdb "$img")
wait_state "$dom" "$a" 2
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
front "$dom" --dev "$a" counted >"$WORK/out" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid"
sim_wait_for 10 grep -q paused "$WORK/out" || { cat "$WORK/out"; bk_fail "rawfront did not run"; }

ctl stats --format prometheus >"$WORK/prom" || bk_fail "xbdctl stats --format prometheus failed"
promtool check metrics <"$WORK/prom" >"$WORK/promtool.out" 2>&1 ||
	{ cat "$WORK/promtool.out"; bk_fail "promtool check metrics rejects the output"; }
[ ! -s "$WORK/promtool.out" ] || { cat "$WORK/promtool.out"; bk_fail "promtool lint complaints"; }
echo "promtool check metrics: ok ($(grep -vc '^#' "$WORK/prom") samples)"

# has SAMPLE: the exact line is in the output.
has() {
	grep -qxF "$1" "$WORK/prom" || { grep -F "${1%%\{*}" "$WORK/prom" >&2; bk_fail "no sample: $1"; }
}
L="domain=\"$dom\",domain_name=\"domU-$dom\",device=\"vbd/$dom/$a\",ring=\"0\""
has "xbd_requests_total{$L,op=\"read\"} 2"
has "xbd_requests_total{$L,op=\"write\"} 3"
has "xbd_requests_total{$L,op=\"flush\"} 1"
has "xbd_requests_total{$L,op=\"discard\"} 1"
has "xbd_requests_total{$L,op=\"barrier\"} 0"
has "xbd_read_bytes_total{$L} 16384"
has "xbd_written_bytes_total{$L} 49152"
has "xbd_invalid_requests_total{$L,reason=\"bad_op\"} 1"
has "xbd_io_errors_total{$L} 0"
has "xbd_requests_in_flight{$L} 0"
has "xbd_io_submit_batch_iocbs_count{$L} 5"
has "xbd_io_submit_batch_iocbs_sum{$L} 5"
has "xbd_request_latency_seconds_count{$L,op=\"write\"} 3"
has "xbd_request_latency_seconds_bucket{$L,op=\"write\",le=\"+Inf\"} 3"
has "xbd_request_latency_seconds_count{$L,op=\"barrier\"} 0"
has "xbd_device_size_bytes{domain=\"$dom\",domain_name=\"domU-$dom\",device=\"vbd/$dom/$a\"} 16777216"
has "xbd_device_rings{domain=\"$dom\",domain_name=\"domU-$dom\",device=\"vbd/$dom/$a\"} 1"
# The text format's escapes: \" and \\ inside a label value.
esc=$(printf '%s' "$img" | sed 's/\\/\\\\/g; s/"/\\"/g')
has "xbd_device_info{domain=\"$dom\",domain_name=\"domU-$dom\",device=\"vbd/$dom/$a\",state=\"Connected\",mode=\"rw\",cache=\"writeback\",grants=\"persistent\",params=\"$esc\"} 1"
grep -q '^# TYPE xbd_request_latency_seconds histogram$' "$WORK/prom" || bk_fail "latency is not a histogram"
grep -q '^# TYPE xbd_requests_total counter$' "$WORK/prom" || bk_fail "requests_total is not a counter"
# Cumulative buckets: never decreasing, from le 1.024e-06 s up to +Inf.
grep "^xbd_request_latency_seconds_bucket{$L,op=\"read\"," "$WORK/prom" | awk '
	{ v = $NF; if (v < last) bad = 1; last = v; n++ }
	END { exit !(n == 28 && !bad && last == 2) }' || bk_fail "read's latency buckets are not cumulative up to 2"
grep -q "^xbd_request_latency_seconds_bucket{$L,op=\"read\",le=\"1.024e-06\"} " "$WORK/prom" ||
	bk_fail "the first latency bound is not 1.024e-06 s"
sum=$(grep -F "xbd_request_latency_seconds_sum{$L,op=\"read\"} " "$WORK/prom" | cut -d" " -f2)
awk -v s="$sum" 'BEGIN { exit !(s > 0 && s < 10) }' || bk_fail "read latency sum $sum s"

# A bad format is refused with its name.
ctl stats --format yaml >/dev/null 2>"$WORK/err" && bk_fail "--format yaml accepted"
grep -q "unknown format 'yaml'" "$WORK/err" || { cat "$WORK/err"; bk_fail "no message for --format yaml"; }

# The timer's service: its command, with the textfile directory of this test.
unit="$top_builddir/blkback/installed/xbd-back-metrics.service"
[ -f "$unit" ] || bk_fail "$unit not built"
cmd=$(sed -n 's/^ExecStart=//p' "$unit" | sed 's/\$\$/$/g; s|[^ ]*/xbdctl |"$XBDCTL" |')
mkdir "$WORK/textfile"
(XBD_TEXTFILE_DIR=$WORK/textfile XBD_CONTROL=$CTL XBDCTL=$XBDCTL eval "$cmd") ||
	bk_fail "xbd-back-metrics.service's command failed: $cmd"
[ -f "$WORK/textfile/xbd-back.prom" ] && [ ! -e "$WORK/textfile/xbd-back.prom.tmp" ] ||
	bk_fail "no xbd-back.prom written"
promtool check metrics <"$WORK/textfile/xbd-back.prom" || bk_fail "the textfile is not valid"
grep -qxF "xbd_requests_total{$L,op=\"write\"} 3" "$WORK/textfile/xbd-back.prom" ||
	bk_fail "the textfile lacks the counters"

touch "$WORK/go"
wait "$fpid" || { cat "$WORK/out"; bk_fail "rawfront failed"; }
kill -TERM "$BACK_PID"
wait "$BACK_PID" || bk_fail "xbd-back exited with status $? after SIGTERM"
BACK_PID=
# No daemon: no stale figures.
(XBD_TEXTFILE_DIR=$WORK/textfile XBD_CONTROL=$CTL XBDCTL=$XBDCTL eval "$cmd") 2>/dev/null &&
	bk_fail "the command succeeded without a daemon"
[ ! -e "$WORK/textfile/xbd-back.prom" ] || bk_fail "a stale xbd-back.prom was left"
bk_done
