#!/bin/sh
# xbd-back as a systemd service: Type=notify (READY, RELOADING, STOPPING
# through sd_notify when built with libsystemd), SIGHUP re-reads the
# configuration file for devices that appear from then on (a bad file is
# refused and the running settings stay), `xbdctl set` without a device
# changes the defaults for new devices, and log lines carry the journal's
# priority prefix when stderr is the journal.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"

dom=$(new_domain)
for d in a b c d; do
	new_disk "$WORK/$d.img" 4M
done
CTL=$WORK/ctl.sock
CONF=$WORK/xbd-back.conf
printf '%s\n' "control = $CTL" "types = vbd" >"$CONF"
ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}
settings() {
	ctl list --json "$dom/$1" | jq -c '.devices[0].settings | {cache, max_batch}'
}
# expect DEVID JSON: that device's cache and max_batch.
expect() {
	_got=$(settings "$1")
	[ "$_got" = "$2" ] || bk_fail "device $1: settings $_got, expected $2"
}

notify=false
if grep -q "define HAVE_SYSTEMD 1" "$top_builddir/config.h" && command -v python3 >/dev/null 2>&1; then
	notify=true
	notify_listen
	NOTIFY_SOCKET=$WORK/notify
	export NOTIFY_SOCKET
fi
start_back --config "$CONF"
unset NOTIFY_SOCKET
sim_wait_for 10 test -S "$CTL" || bk_fail "no control socket"
if $notify; then
	sim_wait_for 20 grep -q "READY=1" "$WORK/notified" || bk_fail "no READY=1 from sd_notify"
fi
a=$(add_disk "$dom" xvdb "$WORK/a.img")
wait_state "$dom" "$a" 2
expect "$a" '{"cache":"writeback","max_batch":32}'

# New defaults and a [disk] section, re-read on SIGHUP.
cat >>"$CONF" <<EOC
max-batch = 8
[disk $WORK/b.img]
cache = writethrough
EOC
kill -HUP "$BACK_PID"
sim_wait_for 20 grep -q "configuration reloaded from $CONF: 1 disk section" "$LOG" || bk_fail "SIGHUP did not reload"
if $notify; then
	sim_wait_for 20 sh -c "grep -A1 RELOADING=1 '$WORK/notified' | grep -q READY=1" ||
		bk_fail "no RELOADING=1 then READY=1"
fi
expect "$a" '{"cache":"writeback","max_batch":32}'
b=$(add_disk "$dom" xvdc "$WORK/b.img")
wait_state "$dom" "$b" 2
expect "$b" '{"cache":"writethrough","max_batch":8}'

# A bad file on SIGHUP: one line saying why, and the daemon keeps its settings.
echo "max-batch = huge" >>"$CONF"
kill -HUP "$BACK_PID"
sim_wait_for 20 grep -q "configuration not reloaded" "$LOG" || bk_fail "bad file on SIGHUP not reported"
grep -q "$CONF:6: invalid value 'huge' for max-batch" "$LOG" || bk_fail "the bad line is not named"
kill -0 "$BACK_PID" || bk_fail "xbd-back died on a bad file"
c=$(add_disk "$dom" xvdd "$WORK/c.img")
wait_state "$dom" "$c" 2
expect "$c" '{"cache":"writeback","max_batch":8}'

# xbdctl set without a device: every device, and the defaults for new ones.
ctl set max-batch=4 | grep -q "^defaults: max-batch=4" || bk_fail "set did not change the defaults"
expect "$a" '{"cache":"writeback","max_batch":4}'
d=$(add_disk "$dom" xvde "$WORK/d.img")
wait_state "$dom" "$d" 2
expect "$d" '{"cache":"writeback","max_batch":4}'

stop_back || bk_fail "xbd-back exited $? on SIGTERM"
if $notify; then
	sim_wait_for 20 grep -q "STOPPING=1" "$WORK/notified" || bk_fail "no STOPPING=1"
fi
# Devices waiting for their frontend stay in InitWait for the next daemon.
[ "$(bstate "$dom" "$a")" = 2 ] || bk_fail "state of $a after SIGTERM: $(bstate "$dom" "$a")"

# stderr is the journal (JOURNAL_STREAM names it) and its native socket
# cannot be reached: lines carry "<priority>" (stats-parse.sh has the
# native socket and its fields).
: >"$WORK/journal"
JOURNAL_STREAM=$(stat -c %d:%i "$WORK/journal") XBD_TEST_JOURNAL_SOCKET=$WORK/no-journal.sock
export JOURNAL_STREAM XBD_TEST_JOURNAL_SOCKET
(sim_env 0 && exec "$XBD_BACK" --config "$CONF.none" --types vbd --control none -v --run true) \
	2>>"$WORK/journal" && bk_fail "missing --config accepted"
(sim_env 0 && exec "$XBD_BACK" --types vbd --control none -v --run true) 2>>"$WORK/journal" ||
	bk_fail "xbd-back --run true failed"
unset JOURNAL_STREAM XBD_TEST_JOURNAL_SOCKET
cat "$WORK/journal"
grep -q "^<6>xbd-back: vbd/$dom/$a: " "$WORK/journal" || bk_fail "no journal priority prefix with the device"
bk_done
