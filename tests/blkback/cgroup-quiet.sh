#!/bin/sh
# Quiet when nothing is asked: a start with no io-weight or cpu-weight set
# says nothing about cgroup weights (however unusable cgroups are here: a
# hybrid host, workers = 0); a start whose configuration sets one says in
# one warning that it is not applied and why; and a weight first set at
# run time (xbdctl set) is said once then.
. "$top_srcdir/tests/blkback/common.sh"
unset XBD_TEST_CGROUP

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
for w in 0 1; do
	[ "$w" = 1 ] && [ "$(id -u)" != 0 ] && { echo "workers = 1 needs root: not checked"; continue; }
	: >"$LOG"
	start_back_ctl --workers "$w"
	wait_state "$dom" "$a" 2
	ctl list >/dev/null || bk_fail "xbdctl list failed"
	grep "cgroups" "$LOG" && bk_fail "workers = $w, no weight set: a line about cgroups"
	# Set at run time: said once, as a warning, with why.
	ctl set "vbd/$dom/$a" io-weight=300 >/dev/null || bk_fail "xbdctl set io-weight failed"
	ctl set "vbd/$dom/$a" cpu-weight=200 >/dev/null || bk_fail "xbdctl set cpu-weight failed"
	sim_wait_for 5 grep -q "weights not applied: " "$LOG" ||
		bk_fail "workers = $w: io-weight set at run time and no line saying it is not applied"
	[ "$(grep -c "weights not applied" "$LOG")" = 1 ] || bk_fail "workers = $w: said more than once"
	stop_back || bk_fail "xbd-back exited with status $?"
	echo "workers = $w: quiet until a weight was set, then one line"
done

printf '[disk %s]\nio-weight = 500\n' "$WORK/a.img" >"$WORK/w.conf"
: >"$LOG"
run_back --config "$WORK/w.conf" --workers 0 --run true || bk_fail "xbd-back with io-weight did not run"
[ "$(grep -c "cgroups: weights not applied: workers = 0" "$LOG")" = 1 ] ||
	bk_fail "io-weight in the file: not one line saying it is not applied"
echo "a weight in the file: one line at start"
bk_done
