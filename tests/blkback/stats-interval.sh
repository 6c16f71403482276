#!/bin/sh
# `xbdctl stats --interval N`, the live view: its header and columns, one
# line per device and sample, rates that add up over the samples to what
# the daemon counted for a known workload (xbd-front bench reads, then
# writes of 64 KiB, one queue), the mean in flight within the queue depth
# (8), idle samples at zero, and a clean stop on SIGINT.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
sim_need blkfront/xbd-front
FRONT="$top_builddir/blkfront/xbd-front"

dom=$(new_domain)
new_disk "$WORK/a.img" 32M
CTL=$WORK/ctl.sock
ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}
start_back --types vbd --control "$CTL"
sim_wait_for 10 test -S "$CTL" || bk_fail "no control socket $CTL"
a=$(add_disk "$dom" xvdb "$WORK/a.img")
dev=vbd/$dom/$a
wait_state "$dom" "$a" 2

# Bad values are refused before anything is asked.
ctl stats --interval 0 2>"$WORK/err" && bk_fail "--interval 0 accepted"
grep -q "interval '0'" "$WORK/err" || bk_fail "no message for --interval 0"
ctl stats --interval 1 --json 2>/dev/null && bk_fail "--interval with --json accepted"
ctl list --interval 1 2>/dev/null && bk_fail "--interval with list accepted"

# Samples of 0.5 s around a workload: the view's first sample is taken
# before the workload starts, and it is stopped once two samples have ended
# after the workload did (the last of them idle), however long the workload
# took to start on a loaded machine.
"$XBDCTL" --socket "$CTL" stats "$dev" --interval 0.5 --count 600 >"$WORK/view" 2>"$WORK/view.err" &
vpid=$!
sim_wait_for 20 sh -c "[ \$(wc -l <'$WORK/view') -ge 2 ]" || bk_fail "the live view printed no sample"
"$ASDOM" "$dom" "$FRONT" bench --vdev xvdb --queues 1 --rw randread --bs 4k --iodepth 8 --runtime 1 \
	>"$WORK/out.read" 2>&1 || { cat "$WORK/out.read"; bk_fail "xbd-front bench (reads) failed"; }
"$ASDOM" "$dom" "$FRONT" bench --vdev xvdb --queues 1 --rw write --bs 64k --iodepth 4 --runtime 1 \
	>"$WORK/out.write" 2>&1 || { cat "$WORK/out.write"; bk_fail "xbd-front bench (writes) failed"; }
done_at=$(wc -l <"$WORK/view")
sim_wait_for 30 sh -c "[ \$(wc -l <'$WORK/view') -ge $((done_at + 2)) ]" || bk_fail "the live view stopped printing"
kill -INT "$vpid"
wait "$vpid" || { cat "$WORK/view.err"; bk_fail "xbdctl stats --interval exited with status $?"; }
cat "$WORK/view"
[ ! -s "$WORK/view.err" ] || { cat "$WORK/view.err"; bk_fail "the live view wrote to stderr"; }

ctl stats --json "$dev" >"$WORK/json" || bk_fail "xbdctl stats --json failed"
reads=$(jq '.devices[0].stats.requests.read' "$WORK/json")
writes=$(jq '.devices[0].stats.requests.write' "$WORK/json")
rsect=$(jq '.devices[0].stats.sectors.read' "$WORK/json")
wsect=$(jq '.devices[0].stats.sectors.written' "$WORK/json")
echo "daemon: $reads reads ($rsect sectors), $writes writes ($wsect sectors)"
[ "$reads" -gt 100 ] && [ "$writes" -gt 10 ] || bk_fail "the workload did too little"

head -1 "$WORK/view" | grep -Eq '^TIME +DEVICE +r/s +w/s +rMiB/s +wMiB/s +o/s +p50us +p99us +inflt +batch +ntf-in +ntf-out$' ||
	bk_fail "wrong header: $(head -1 "$WORK/view")"
lines=$(wc -l <"$WORK/view")
[ "$lines" -ge 5 ] && [ "$lines" -le 600 ] || bk_fail "$lines lines: not a header and the samples"
tail -n +2 "$WORK/view" | awk -v dev="$dev" -v reads="$reads" -v writes="$writes" \
	-v rmib="$(echo "$rsect" | awk '{ print $1 * 512 / 1048576 }')" \
	-v wmib="$(echo "$wsect" | awk '{ print $1 * 512 / 1048576 }')" '
	# Samples land a few ms late under load: within 10%.
	function near(got, want) { return got >= want * 0.9 - 2 && got <= want * 1.1 + 2 }
	NF != 13 { print "line " NR ": " NF " fields"; bad = 1 }
	$1 !~ /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$/ { print "line " NR ": time " $1; bad = 1 }
	$2 != dev { print "line " NR ": device " $2; bad = 1 }
	{ r += $3 * 0.5; w += $4 * 0.5; rm += $5 * 0.5; wm += $6 * 0.5 }
	# A busy sample: latency quantiles in order, a batch, notifications per request.
	$3 + $4 > 0 && ($8 == "-" || $9 == "-" || $8 + 0 > $9 + 0 || $11 == "-" || $12 == "-" || $13 == "-") {
		print "line " NR ": busy but " $8 " " $9 " " $11 " " $12 " " $13; bad = 1 }
	# (a sample that caught only the first few requests of a job may round to 0.00 in flight)
	$3 + $4 > 0 { busy++; if ($10 + 0 < 0 || $10 + 0 > 8) { print "line " NR ": inflt " $10; bad = 1 }
		if ($10 + 0 > 0) inflt++ }
	# An idle sample: zeros and dashes.
	$3 + $4 + $7 == 0 { idle++; if ($8 != "-" || $9 != "-" || $10 != "0.00" || $11 != "-") {
		print "line " NR ": idle but " $0; bad = 1 } }
	END {
		printf "view: %.0f reads, %.0f writes, %.2f MiB read, %.2f MiB written; %d busy, %d idle samples\n", r, w, rm, wm, busy, idle
		if (!near(r, reads) || !near(w, writes)) { print "request rates do not add up"; bad = 1 }
		if (!near(rm, rmib) || !near(wm, wmib)) { print "MiB/s do not add up"; bad = 1 }
		if (busy < 2 || idle < 1) { print "expected busy and idle samples"; bad = 1 }
		if (!inflt) { print "no busy sample with requests in flight"; bad = 1 }
		exit bad
	}' || bk_fail "the live view does not match the workload"

# Ctrl-C: a clean stop, status 0, whole lines only.
# (xbdctl itself in the background, not a subshell: $! must be its pid.)
"$XBDCTL" --socket "$CTL" stats --interval 0.2 >"$WORK/view2" 2>"$WORK/view2.err" &
vpid=$!
sim_wait_for 10 sh -c "[ \$(wc -l <'$WORK/view2') -ge 3 ]" || bk_fail "the open-ended view printed nothing"
kill -INT "$vpid"
wait "$vpid" || bk_fail "the live view exited with status $? on SIGINT"
[ ! -s "$WORK/view2.err" ] || { cat "$WORK/view2.err"; bk_fail "stderr after SIGINT"; }
[ "$(tail -c 1 "$WORK/view2" | od -An -c | tr -d ' ')" = '\n' ] || bk_fail "a partial line after SIGINT"
bk_done
