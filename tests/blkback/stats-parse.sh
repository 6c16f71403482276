#!/bin/sh
# What xbd-back says always parses, and names a device one way: with a
# disk path holding a byte that is not UTF-8 (and a quote), `xbdctl stats
# --json` is JSON to python3 and jq and the Prometheus output passes
# promtool; a device's ring counters stay in the Prometheus output, with
# their values, once its frontend has closed; the log, xbdctl and
# Prometheus all spell it vbd/DOMID/DEVID; and with stderr on the journal
# (JOURNAL_STREAM) its lines reach the journal's native socket with
# XBD_DEVICE= and DOMID= fields.
. "$top_srcdir/tests/blkback/common.sh"
command -v promtool >/dev/null 2>&1 || skip "promtool not installed (Debian's prometheus package)"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
"$XBD_BACK" --help | grep -q . || skip "xbd-back --help"

dom=$(new_domain)
img="$WORK/bad$(printf '\377\376')\"name.img"
new_disk "$img" 16M
a=$(add_disk "$dom" xvdb "$img")
CTL=$WORK/ctl.sock
ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}
journal_listen
: >>"$LOG"
JOURNAL_STREAM=$(stat -c '%d:%i' "$LOG") XBD_TEST_JOURNAL_SOCKET=$WORK/journal.sock
export JOURNAL_STREAM XBD_TEST_JOURNAL_SOCKET
start_back --types vbd --control "$CTL"
unset JOURNAL_STREAM XBD_TEST_JOURNAL_SOCKET
sim_wait_for 10 test -S "$CTL" || bk_fail "no control socket $CTL"
front_paused "$dom" "$a" "$WORK/out"

ctl stats --json >"$WORK/json" || bk_fail "xbdctl stats --json failed"
python3 -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$WORK/json" ||
	bk_fail "xbdctl stats --json is not JSON to python3 (a path that is not UTF-8)"
jq -e . "$WORK/json" >/dev/null || bk_fail "xbdctl stats --json is not JSON to jq"
[ "$(jq -r '.devices[0].id' "$WORK/json")" = "vbd/$dom/$a" ] || bk_fail "xbdctl's id is not vbd/$dom/$a"
jq -r '.devices[0].params' "$WORK/json" | grep -q "bad\(.\)\{2\}\"name.img$" ||
	bk_fail "params lost in the JSON: $(jq -r '.devices[0].params' "$WORK/json")"
prom() {
	ctl stats --format prometheus >"$WORK/prom" || bk_fail "xbdctl stats --format prometheus failed"
	promtool check metrics <"$WORK/prom" >"$WORK/promtool.out" 2>&1 ||
		{ cat "$WORK/promtool.out"; bk_fail "promtool check metrics rejects the output ($1)"; }
}
prom connected
L="domain=\"$dom\",domain_name=\"domU-$dom\",device=\"vbd/$dom/$a\",ring=\"0\""
grep -qxF "xbd_requests_total{$L,op=\"read\"} 1" "$WORK/prom" ||
	{ grep xbd_requests_total "$WORK/prom"; bk_fail "no read counted while connected"; }

# The frontend finishes and closes: its counters stay, with their values.
touch "$WORK/go"
wait "$FRONT_PID" || { cat "$WORK/out"; bk_fail "rawfront failed"; }
sim_wait_for 10 sh -c "'$XBDCTL' --socket '$CTL' stats --format prometheus |
	grep -qx 'xbd_device_rings{domain=\"$dom\",domain_name=\"domU-$dom\",device=\"vbd/$dom/$a\"} 0'" ||
	bk_fail "the device did not go back to 0 rings"
prom closed
for s in "xbd_requests_total{$L,op=\"read\"} 2" "xbd_requests_total{$L,op=\"write\"} 2" \
	"xbd_read_bytes_total{$L} 16384"; do
	grep -qxF "$s" "$WORK/prom" || { grep "$L" "$WORK/prom" | head -5; bk_fail "closed device: no $s"; }
done

# The journal got the device's lines with fields (and stderr did not).
sim_wait_for 10 sh -c "grep -l 'MESSAGE=vbd/$dom/$a: connected' '$WORK'/msg.* >'$WORK/m'" ||
	bk_fail "no 'vbd/$dom/$a: connected' line on the journal's socket"
m=$(head -1 "$WORK/m")
for f in "XBD_DEVICE=vbd/$dom/$a" "DOMID=$dom" "PRIORITY=6" "SYSLOG_IDENTIFIER=xbd-back"; do
	grep -qxF "$f" "$m" || { cat "$m"; bk_fail "no $f field"; }
done
grep -q "vbd/$dom/$a: connected" "$LOG" && bk_fail "the line went to stderr as well"
bk_done
