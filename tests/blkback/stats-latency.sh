#!/bin/sh
# xbd-back's latency histograms: after exactly known I/O (rawfront's
# "counted": 2 reads, 3 writes, a flush, a discard and a refused bad op),
# `xbdctl stats --json` has one histogram per op whose buckets add up to
# the requests answered, quantiles in order up to the maximum, and the
# table prints p50/p99/p99.9/max for each op that answered requests; the
# device keeps them after the frontend is gone.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
CTL=$WORK/ctl.sock
ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}
# jqdev FILTER: FILTER applied to the device of `xbdctl stats --json`.
jqdev() {
	ctl stats --json "$dev" >"$WORK/json" || bk_fail "xbdctl stats --json failed"
	jq -e ".devices[0] | $1" "$WORK/json" >/dev/null || {
		jq ".devices[0].stats.latency" "$WORK/json" >&2
		bk_fail "not true: $1"
	}
}

start_back --types vbd --control "$CTL" --poll-max-ns 0
sim_wait_for 10 test -S "$CTL" || bk_fail "no control socket $CTL"
a=$(add_disk "$dom" xvdb "$WORK/a.img")
dev=vbd/$dom/$a
wait_state "$dom" "$a" 2
jqdev '.stats.latency | to_entries | all(.value.count == 0 and .value.max_ns == 0)'
ctl stats "$dev" | grep -q "^  latency       none answered yet$" || bk_fail "no 'none answered yet' before I/O"

RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
front "$dom" --dev "$a" counted >"$WORK/out" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid"
sim_wait_for 10 grep -q paused "$WORK/out" || { cat "$WORK/out"; bk_fail "rawfront did not run"; }

for s in .stats .rings[0].stats; do
	l="$s.latency"
	jqdev "[$l.read.count, $l.write.count, $l.flush.count, $l.discard.count, $l.barrier.count] == [2, 3, 1, 1, 0]"
	# The buckets are the answered requests, one bound per power of two from 1024 ns.
	jqdev "$l | to_entries | all(.value.count == (.value.buckets | add))"
	jqdev "$l.read.buckets | keys_unsorted | .[0] == \"1024\" and .[1] == \"2048\" and .[-1] == \"+Inf\" and length == 28"
	for op in read write flush discard; do
		jqdev "$l.$op | .max_ns > 0 and .max_ns < 10000000000 and .p50_ns <= .p99_ns and .p99_ns <= .p999_ns and .p999_ns <= .max_ns and .sum_ns >= .max_ns"
		# Each latency lies in the bucket of its bound: the max within the highest non-empty one.
		jqdev "$l.$op | ([.buckets | to_entries[] | select(.value > 0) | .key] | last) as \$k | (\$k == \"+Inf\" or (.max_ns <= (\$k | tonumber) and .max_ns > ((\$k | tonumber) / 2)))"
	done
done

ctl stats "$dev" >"$WORK/table" || bk_fail "xbdctl stats failed"
cat "$WORK/table"
for op in read write flush discard; do
	grep -Eq "^  (latency )? +$op +p50 [0-9.]+ [nmu]?s  p99 [0-9.]+ [nmu]?s  p99.9 [0-9.]+ [nmu]?s  max [0-9.]+ [nmu]?s  \([0-9]+ answered\)$" "$WORK/table" ||
		bk_fail "no latency line for $op in xbdctl stats"
done
grep -q "^  latency       read " "$WORK/table" || bk_fail "the first latency line is not read's"
grep -q " barrier  *p50" "$WORK/table" && bk_fail "a latency line for barrier, which answered nothing"
grep -q "(2 answered)" "$WORK/table" || bk_fail "read's line does not count 2 answered"

# The frontend goes: the device's totals keep its histograms.
touch "$WORK/go"
wait "$fpid" || { cat "$WORK/out"; bk_fail "rawfront failed"; }
sim_wait_for 10 sh -c "'$XBDCTL' --socket '$CTL' stats --json '$dev' | jq -e '.devices[0].connected == false' >/dev/null" ||
	bk_fail "the frontend did not disconnect"
jqdev ".stats.latency.write.count >= 3 and .stats.latency.read.count >= 2"
bk_done
