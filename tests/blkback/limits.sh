#!/bin/sh
# xbd-back's per-disk I/O limits (throttle.h), end to end on the
# simulator with xbd-front bench as the guest: an IOPS limit set at run
# time with xbdctl set, a byte rate for reads only, a burst, a limit
# removed again, and two disks sharing a throttle group from the
# configuration file; the limits in force and the time requests waited
# in xbdctl stats (text, JSON, Prometheus).  Rates are what the bench
# counted over the time it measured itself (its runtime_s), held
# against the limit with a tolerance, never against a wall clock of our
# own; the disk is null: (no storage cost), and the test skips where
# this machine cannot even reach several times the limit unlimited.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
sim_need blkfront/xbd-front
FRONT="$top_builddir/blkfront/xbd-front"
CTL=$WORK/ctl.sock
ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}
# bench VDEV NAME ARGS...: the bench's JSON in $WORK/NAME.json
bench() {
	_v=$1 _n=$2
	shift 2
	"$ASDOM" "$dom" "$FRONT" bench --vdev "$_v" --queues 1 --json "$@" >"$WORK/$_n.json" \
		2>"$WORK/$_n.err" || { cat "$WORK/$_n.err"; bk_fail "xbd-front bench $_n failed"; }
	jq -e '.errors == 0' "$WORK/$_n.json" >/dev/null || bk_fail "bench $_n: I/O errors"
}
iops() { jq '.iops' "$WORK/$1.json"; }
# within GOT LO HI: LO <= GOT <= HI (decimals)
within() { awk -v g="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(g >= lo && g <= hi) }'; }
# at_limit NAME METRIC LIMIT UNIT: the bench NAME's METRIC (a jq field) is LIMIT within
# 10%, plus one bucket (a tenth of the limit) spread over the time it ran.
at_limit() {
	_got=$(jq ".$2" "$WORK/$1.json")
	_secs=$(jq '.runtime_s' "$WORK/$1.json")
	echo "$1: $_got $4 over $_secs s (limit $3)"
	within "$_got" "$(awk -v l="$3" 'BEGIN { print l * 0.9 }')" \
		"$(awk -v l="$3" -v s="$_secs" 'BEGIN { print l * 1.1 + l / 10 / s }')" ||
		bk_fail "$1: $_got $4 under a limit of $3"
}

cat >"$WORK/xbd-back.conf" <<EOF
[disk null:64M]
throttle-group = g
iops-total = 400
EOF
dom=$(new_domain)
start_back --types vbd --control "$CTL" --config "$WORK/xbd-back.conf"
sim_wait_for 10 test -S "$CTL" || bk_fail "no control socket $CTL"
a=$(add_disk "$dom" xvdb null:1G)
b=$(add_disk "$dom" xvdc null:64M)
c=$(add_disk "$dom" xvdd null:64M)
wait_state "$dom" "$a" 2

# Unlimited first: how far this machine gets, and that a disk without limits says so.
bench xvdb free --rw randread --bs 4k --iodepth 16 --runtime 1
free=$(iops free)
echo "unlimited: $free IOPS"
awk -v f="$free" 'BEGIN { exit !(f >= 1500) }' ||
	skip "this machine reaches only $free IOPS unlimited: too slow to tell a 500 IOPS limit"
ctl stats "vbd/$dom/$a" | grep -q "^  limits        none$" || {
	ctl stats "vbd/$dom/$a"
	bk_fail "no 'limits none' line for a disk without limits"
}

# An IOPS limit set at run time: 500/s.
ctl set "vbd/$dom/$a" iops-total=500 >"$WORK/set.out" || bk_fail "xbdctl set iops-total failed"
grep -q "iops-total=500" "$WORK/set.out" || { cat "$WORK/set.out"; bk_fail "set did not report the limit"; }
bench xvdb limited --rw randread --bs 4k --iodepth 16 --runtime 3
at_limit limited iops 500 IOPS
ctl stats --json "vbd/$dom/$a" >"$WORK/a.json" || bk_fail "xbdctl stats --json failed"
jq -e '.devices[0].limits.iops_total.rate == 500 and .devices[0].settings.iops_total == 500' \
	"$WORK/a.json" >/dev/null || bk_fail "the limit is not in the JSON: $(jq -c '.devices[0].limits' "$WORK/a.json")"
jq -e '.devices[0].stats.throttled.requests > 100 and .devices[0].stats.throttled.ns > 0' \
	"$WORK/a.json" >/dev/null || bk_fail "no throttled time counted: $(jq -c '.devices[0].stats.throttled' "$WORK/a.json")"
ctl stats "vbd/$dom/$a" >"$WORK/a.txt"
grep -q "^  limits        iops-total 500$" "$WORK/a.txt" || { cat "$WORK/a.txt"; bk_fail "no limits line"; }
grep -Eq "^  throttled     [0-9]+ requests waited [0-9.]+ s for the I/O limits$" "$WORK/a.txt" ||
	bk_fail "no throttled line"

# Limits for reads only, in bytes: 8 MiB/s of 64 KiB reads; writes go free.
ctl set "vbd/$dom/$a" iops-total=0 bps-read=8388608 >/dev/null || bk_fail "set bps-read failed"
bench xvdb bps --rw randread --bs 64k --iodepth 8 --runtime 3
at_limit bps read_bw_mib_s 8 MiB/s
bench xvdb writes --rw randwrite --bs 64k --iodepth 8 --runtime 1
got=$(jq '.write_bw_mib_s' "$WORK/writes.json")
echo "writes beside bps-read: $got MiB/s"
# Well above the read limit, where a limit on them would have held them to it.
awk -v g="$got" 'BEGIN { exit !(g > 8 * 2) }' || bk_fail "bps-read held writes back: $got MiB/s"

# A limit removed while requests wait for it: they go at once (within the
# 0.1 s a held ring rechecks), not when the old limit would have let them.
# At 4 KiB/s each 1 MiB read after the first would wait 256 s.
ctl set "vbd/$dom/$a" bps-read=4096 >/dev/null || bk_fail "set bps-read=4096 failed"
"$ASDOM" "$dom" "$FRONT" bench --vdev xvdb --queues 1 --json --rw read --bs 1m --iodepth 4 \
	--runtime 2 >"$WORK/held.json" 2>"$WORK/held.err" &
hp=$!
sleep 1
ctl set "vbd/$dom/$a" bps-read=0 >/dev/null || bk_fail "removing bps-read failed"
sim_wait_for 20 sh -c "! kill -0 $hp 2>/dev/null" || bk_fail "requests still held 20 s after the limit went"
wait "$hp" || { cat "$WORK/held.err"; bk_fail "the held bench failed"; }
echo "bps-read=4096 removed while held: $(jq '.reads' "$WORK/held.json") reads of 1 MiB in its 2 s"
[ "$(jq '.reads' "$WORK/held.json")" -gt 8 ] || bk_fail "the held reads did not go once the limit was removed"

# A burst: 100/s, bursts of 1000/s for 1 s, saved up while idle; then the limit.
ctl set "vbd/$dom/$a" bps-read=0 iops-total=100 iops-total-max=1000 iops-total-max-length=1 \
	>/dev/null || bk_fail "set a burst failed"
sleep 2
# The burst lasts max x length / (max - limit) = 1.1 s: about 1150 requests in the first 1.5 s.
bench xvdb burst --rw randread --bs 4k --iodepth 16 --runtime 1.5
# Then the limit, the next connection included (the buckets outlive a connection).
bench xvdb after --rw randread --bs 4k --iodepth 16 --runtime 3
echo "burst: $(iops burst) IOPS for 1.5 s, then $(iops after) IOPS for 3 s"
awk -v g="$(iops burst)" 'BEGIN { exit !(g >= 550 && g <= 1000) }' ||
	bk_fail "the burst gave $(iops burst) IOPS over 1.5 s (about 770)"
awk -v g="$(iops after)" 'BEGIN { exit !(g >= 85 && g <= 140) }' ||
	bk_fail "after the burst, $(iops after) IOPS (100)"
# A burst below its limit is refused, and nothing changes.
ctl set "vbd/$dom/$a" iops-total-max=50 2>"$WORK/err" && bk_fail "a burst below the limit was taken"
grep -q "iops-total-max = 50 is below iops-total = 100" "$WORK/err" || {
	cat "$WORK/err"
	bk_fail "no clear message for a burst below its limit"
}
# No limit again: back to the machine's rate.
ctl set "vbd/$dom/$a" iops-total=0 iops-total-max=0 >/dev/null || bk_fail "removing the limit failed"
bench xvdb free2 --rw randread --bs 4k --iodepth 16 --runtime 1
echo "limit removed: $(iops free2) IOPS"
awk -v g="$(iops free2)" 'BEGIN { exit !(g > 100 * 5) }' || bk_fail "still limited: $(iops free2) IOPS"

# A group from the configuration file: xvdc and xvdd share 400/s.  The two
# benches start at different moments, so the rate is what the daemon
# counted for both between two samples taken while both run, over the
# time that passed between the samples.
# reads_now: "SECONDS READS" (the reads of xvdc and xvdd together)
reads_now() {
	ctl stats --json >"$WORK/g.json" || bk_fail "xbdctl stats --json failed"
	echo "$(date +%s.%N) $(jq "[.devices[] | select(.id == \"vbd/$dom/$b\" or .id == \"vbd/$dom/$c\") |
		.stats.requests.read] | add" "$WORK/g.json")"
}
"$ASDOM" "$dom" "$FRONT" bench --vdev xvdc --queues 1 --json --rw randread --bs 4k --iodepth 8 \
	--runtime 5 >"$WORK/gc.json" 2>"$WORK/gc.err" &
p1=$!
"$ASDOM" "$dom" "$FRONT" bench --vdev xvdd --queues 1 --json --rw randread --bs 4k --iodepth 8 \
	--runtime 5 >"$WORK/gd.json" 2>"$WORK/gd.err" &
p2=$!
sleep 1.5
s1=$(reads_now)
sleep 2
s2=$(reads_now)
wait "$p1" || { cat "$WORK/gc.err"; bk_fail "bench on xvdc failed"; }
wait "$p2" || { cat "$WORK/gd.err"; bk_fail "bench on xvdd failed"; }
sum=$(echo "$s1 $s2" | awk '{ printf "%.1f", ($4 - $2) / ($3 - $1) }')
echo "group g (iops-total 400): xvdc $(iops gc) + xvdd $(iops gd) IOPS by the benches;" \
	"the daemon counted $sum reads/s for both between two samples"
within "$sum" 340 470 || bk_fail "the group's two disks got $sum IOPS together (400)"
awk -v x="$(iops gc)" -v y="$(iops gd)" 'BEGIN { exit !(x > 100 && y > 100) }' ||
	bk_fail "one disk of the group starved the other: $(iops gc) and $(iops gd) IOPS"
ctl stats "vbd/$dom/$b" | grep -q "^  limits        iops-total 400  group g$" || {
	ctl stats "vbd/$dom/$b"
	bk_fail "no group in the limits line"
}
# Set on one disk of the group: the group's limit, shown on both.
ctl set "vbd/$dom/$b" iops-total=200 >"$WORK/gset.out" || bk_fail "set on a group's disk failed"
grep -q "vbd/$dom/$c: .*iops-total=200" "$WORK/gset.out" || {
	cat "$WORK/gset.out"
	bk_fail "set on one disk of a group did not set its group-mate"
}
bench xvdd gd2 --rw randread --bs 4k --iodepth 8 --runtime 2
echo "group g set to 200: xvdd alone $(iops gd2) IOPS"
awk -v g="$(iops gd2)" 'BEGIN { exit !(g >= 170 && g <= 250) }' || bk_fail "the group's new limit: $(iops gd2)"

# Prometheus: the limits in force, and the throttled counters.
ctl stats --format prometheus >"$WORK/prom" || bk_fail "xbdctl stats --format prometheus failed"
grep -q "^xbd_device_limit_per_second{domain=\"$dom\",domain_name=\"domU-$dom\",device=\"vbd/$dom/$c\",limit=\"iops-total\",unit=\"operations\"} 200$" \
	"$WORK/prom" || { grep limit "$WORK/prom"; bk_fail "no limit series"; }
grep -q "^xbd_throttled_seconds_total{domain=\"$dom\",domain_name=\"domU-$dom\",device=\"vbd/$dom/$a\",ring=\"0\"} [0-9.e+-]*$" \
	"$WORK/prom" || bk_fail "no throttled seconds series"
# Each family's HELP and TYPE once (what promtool would say, checked here without it).
dup=$(grep -E '^# (HELP|TYPE) ' "$WORK/prom" | awk '{ print $2, $3 }' | sort | uniq -d)
[ -z "$dup" ] || bk_fail "HELP or TYPE given twice: $dup"
if command -v promtool >/dev/null 2>&1; then
	promtool check metrics <"$WORK/prom" >"$WORK/promtool" 2>&1 || {
		cat "$WORK/promtool"
		bk_fail "promtool rejects the output"
	}
fi

# A contradiction in the file is refused at start, naming the section.
printf '[disk /srv/*]\niops-read = 100\niops-read-max = 10\n' >"$WORK/bad.conf"
run_back --config "$WORK/bad.conf" --check-config >/dev/null 2>"$WORK/bad.err" &&
	bk_fail "a burst below its limit passed --check-config"
grep -q "\[disk /srv/\*\]: iops-read-max = 10 is below iops-read = 100" "$LOG" "$WORK/bad.err" || {
	cat "$WORK/bad.err"
	bk_fail "no clear message for the bad section"
}
bk_done
