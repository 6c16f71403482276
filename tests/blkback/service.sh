#!/bin/sh
# xbd-back as a service: started from its configuration file on the
# simulator, disks attached and detached as libxl does, and `xbdctl stats
# --json` counters that move exactly as the I/O done says they must;
# xbdctl list, set (run-time max-batch and polling), errors, and the
# control socket removed at exit.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
new_disk "$WORK/b.img" 16M
CTL=$WORK/ctl.sock
cat >"$WORK/xbd-back.conf" <<EOC
# service test
types = vbd
control = $CTL
max-batch = 16
poll-max-ns = 0

[disk $WORK/b.*]
cache = unsafe
EOC
ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}
# jqdev DEVICE FILTER: FILTER applied to that device of `xbdctl stats --json`.
jqdev() {
	ctl stats --json "$1" >"$WORK/json" || bk_fail "xbdctl stats --json $1 failed"
	jq -e ".devices[0] | $2" "$WORK/json" >/dev/null || {
		jq . "$WORK/json" >&2
		bk_fail "$1: not true: $2"
	}
}

start_back --config "$WORK/xbd-back.conf"
sim_wait_for 10 test -S "$CTL" || bk_fail "no control socket $CTL"
ctl version | grep -q "^xbd-back " || bk_fail "xbdctl version"
a=$(add_disk "$dom" xvdb "$WORK/a.img")
wait_state "$dom" "$a" 2
ctl list >"$WORK/list" || bk_fail "xbdctl list failed"
cat "$WORK/list"
grep -q "^vbd/$dom/$a  *domU-$dom  *InitWait .* $WORK/a.img\$" "$WORK/list" || bk_fail "xbdctl list does not show the disk"
# The settings came from the file.
jqdev "vbd/$dom/$a" '.settings.max_batch == 16 and .settings.poll_max_ns == 0 and .settings.cache == "writeback"'
ctl list --json | jq -e '.daemon.types == ["vbd"] and .daemon.platform == "sim"' >/dev/null ||
	bk_fail "list --json daemon part"

# Exactly known I/O: 3 writes of 32 sectors, 2 reads of 16, a flush, a discard, a bad op.
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
front "$dom" --dev "$a" counted >"$WORK/out" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid"
sim_wait_for 10 grep -q paused "$WORK/out" || { cat "$WORK/out"; bk_fail "rawfront did not run"; }
jqdev "$dom/$a" '.state == "Connected" and .connected and (.rings | length) == 1'
for f in stats rings[0].stats; do
	jqdev "$dom/$a" ".$f.requests == {read: 2, write: 3, flush: 1, discard: 1, barrier: 0}"
	jqdev "$dom/$a" ".$f.sectors == {read: 32, written: 96}"
	jqdev "$dom/$a" ".$f.errors.invalid == 1 and .$f.errors.invalid_by_reason.bad_op == 1 and .$f.errors.io == 0 and .$f.errors.grant == 0"
done
# The ring's indexes (what a hung ring's dump shows): 8 requests on a fresh
# ring, all consumed, answered and pushed; after its final check the ring
# thread asked for a notification at the 9th request and sleeps in epoll
# with the port unmasked.
ringok='.rings[0].ring | .req_prod == 8 and .req_cons == 8 and .rsp_prod == 8 and .rsp_pushed == 8 and .req_event == 9 and .inflight == 0 and .port_masked == false and .port >= 0 and .remote_port >= 0 and .asleep_ms >= 0'
sim_wait_for 5 sh -c "\"\$0\" --socket '$CTL' stats --json 'vbd/$dom/$a' | jq -e '.devices[0] | $ringok'" "$XBDCTL" >/dev/null ||
	jqdev "vbd/$dom/$a" "$ringok"
s=.stats
# Every read and write went through io_submit; the histogram adds up.
jqdev "$dom/$a" "$s.io_submit.iocbs == 5 and ($s.io_submit.batch_size_histogram | add) == $s.io_submit.calls"
jqdev "$dom/$a" "$s.completions.reaped >= 5 and $s.completions.reap_calls >= 1"
# 5 requests with 16 pages: persistent grants map each page once (hits + misses = 16),
# the misses of a batch with one call (harden: at most one call per miss).
jqdev "$dom/$a" ".grants == \"persistent\" and $s.grants.persistent_hits + $s.grants.persistent_misses == 16 and $s.grants.map_calls >= 1 and $s.grants.map_calls <= $s.grants.persistent_misses"
# rawfront kicks for each of its 8 requests and waits for each answer;
# with notification suppression the backend notifies at most once per
# response pushed, and at least once.
jqdev "$dom/$a" "$s.notifications.received >= 1 and $s.notifications.sent >= 1 and $s.notifications.sent <= 8"
# poll-max-ns = 0 from the file: the ring never polled.
jqdev "$dom/$a" "$s.poll == {hits: 0, misses: 0, ns: 0}"
# The table says the same.
ctl stats "vbd/$dom/$a" >"$WORK/table" || bk_fail "xbdctl stats failed"
cat "$WORK/table"
grep -q "requests *read 2  write 3  flush 1  discard 1" "$WORK/table" || bk_fail "table: requests"
grep -q "sectors *read 32  written 96" "$WORK/table" || bk_fail "table: sectors"
grep -q "errors *invalid 1 .*bad_op 1" "$WORK/table" || bk_fail "table: errors"
touch "$WORK/go"
wait "$fpid" || { cat "$WORK/out"; bk_fail "rawfront failed"; }
wait_state "$dom" "$a" 6
# The frontend closed: the counters stay with the device.
jqdev "$dom/$a" '.connected == false and .stats.requests.write == 3 and .stats.sectors.read == 32'

# The [disk] section of the file applies to b; run-time changes for b only.
b=$(add_disk "$dom" xvdc "$WORK/b.img")
wait_state "$dom" "$b" 2
jqdev "vbd/$dom/$b" '.settings.cache == "unsafe"'
ctl set "vbd/$dom/$b" max-batch=1 poll-max-ns=1000000 >"$WORK/set" || bk_fail "xbdctl set failed"
grep -q "vbd/$dom/$b: max-batch=1 poll-max-ns=1000000" "$WORK/set" || bk_fail "set did not say what it did"
jqdev "vbd/$dom/$b" '.settings.max_batch == 1 and .settings.poll_max_ns == 1000000'
jqdev "vbd/$dom/$a" '.settings.max_batch == 16 and .settings.poll_max_ns == 0'
# max-batch=1 reaches the ring thread: at queue depth 16 every io_submit carries one iocb.
front "$dom" --dev "$b" --qd 16 --secs 1 stress >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "stress failed"; }
jqdev "vbd/$dom/$b" '.stats.io_submit.calls > 16 and .stats.io_submit.calls == .stats.io_submit.iocbs and .stats.io_submit.batch_size_histogram["1"] == .stats.io_submit.calls'
# poll-max-ns=1000000 reaches it too: the ring polled.
jqdev "vbd/$dom/$b" '.stats.poll.hits + .stats.poll.misses > 0'
# set changes only the keys given.
ctl set "$WORK/b.img" max-batch=2 >/dev/null || bk_fail "set by params failed"
jqdev "vbd/$dom/$b" '.settings.max_batch == 2 and .settings.poll_max_ns == 1000000 and .settings.cache == "unsafe"'

# Errors: one line, exit 1.
ctl set "vbd/$dom/$b" cache=unsafe 2>"$WORK/err" && bk_fail "set cache accepted"
grep -q "'cache' cannot be changed at run time" "$WORK/err" || bk_fail "set cache: $(cat "$WORK/err")"
# The keys set allows are the settings --help marks (*): one table.
# (an option whose help starts on the next line, a long name, is joined with it)
want=$("$XBD_BACK" --help | sed -n '/^Settings/,/^$/p' | awk '
	/^  --/ { if (opt != "") print opt, txt; opt = $1; txt = $0; next }
	/^    / { txt = txt " " $0; next }
	END { if (opt != "") print opt, txt }' |
	grep '(\*)' | awk '{ sub(/^--/, "", $1); print $1 }' | tr '\n' ',' | sed 's/,$//; s/,/, /g')
grep -qF "(allowed: $want)" "$WORK/err" || bk_fail "set's keys are not --help's (*) ones ($want): $(cat "$WORK/err")"
ctl set max-batch=lots 2>"$WORK/err" && bk_fail "set max-batch=lots accepted"
grep -q "invalid value 'lots' for max-batch: an integer from 0 to 4096" "$WORK/err" || bk_fail "bad value: $(cat "$WORK/err")"
ctl stats vbd/99/1 2>"$WORK/err" && bk_fail "stats of a missing device succeeded"
grep -q "no device 'vbd/99/1'" "$WORK/err" || bk_fail "missing device: $(cat "$WORK/err")"
"$XBDCTL" --socket "$WORK/nothing.sock" list 2>"$WORK/err" && bk_fail "xbdctl without a daemon succeeded"
grep -q "cannot reach xbd-back at $WORK/nothing.sock" "$WORK/err" || bk_fail "no daemon: $(cat "$WORK/err")"

# Detach as libxl does: the backend reaches Closed and the device is gone.
"$XBD_SIM" disk remove "$SIMDIR" "$dom" "$a" --timeout 5 || bk_fail "detach of $a: backend did not close"
sim_wait_for 5 sh -c "! '$XBDCTL' --socket '$CTL' list | grep -q 'vbd/$dom/$a '" || bk_fail "$a still listed after detach"
ctl list | grep -q "^vbd/$dom/$b " || bk_fail "$b gone too"
[ "$(xs ls "/local/domain/0/backend/vbd/$dom" 2>/dev/null | grep -c "^$a ")" = 0 ] || bk_fail "backend of $a left in xenstore"

stop_back || bk_fail "xbd-back exited $? on SIGTERM"
[ ! -e "$CTL" ] || bk_fail "control socket left behind"
bk_done
