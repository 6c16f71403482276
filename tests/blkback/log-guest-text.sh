#!/bin/sh
# xbd-back: text a guest wrote is data, never a log line of its own.  A
# frontend whose protocol value carries a newline and a forged line about
# another guest's device gets one log line about its own device, with the
# newline and other unprintable bytes escaped as \xNN and the value cut
# short; and a frontend that asks to connect over and over with keys that
# cannot work gets its device's lines rate-limited, with a line saying how
# many were suppressed.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
other=$(new_domain)
new_disk "$WORK/a.img" 4M
new_disk "$WORK/b.img" 4M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
b=$(add_disk "$other" xvdb "$WORK/b.img")
start_back
wait_state "$dom" "$a" 2
fe=/local/domain/$dom/device/vbd/$a
forged="x86_64-abi
xbd-back: vbd/$other/$b: disconnected$(printf '\033[2J')$(head -c 200 /dev/zero | tr '\0' z)"
"$ASDOM" "$dom" xenstore-write "$fe/ring-ref" 8 "$fe/event-channel" 1 "$fe/protocol" "$forged" \
	"$fe/state" 3 || fail "cannot write the frontend keys"
wait_state "$dom" "$a" 5
grep -q "^xbd-back: vbd/$other/$b: disconnected" "$LOG" && bk_fail "a guest forged a log line about another device"
grep -q "^xbd-back: vbd/$dom/$a: unknown protocol 'x86_64-abi\\\\x0axbd-back: vbd/$other/$b: disconnected\\\\x1b\[2Jzz*\.\.\.'$" "$LOG" ||
	bk_fail "the protocol value is not logged escaped and cut short on one line"
line=$(grep "unknown protocol" "$LOG")
[ "${#line}" -lt 200 ] || bk_fail "the logged value is not cut short (${#line} bytes)"

# Connects that fail again and again: at most a burst of lines per window, then a count.
# The bound is per window that actually elapsed (a loaded machine stretches
# the loop over more of them): each kind (errors and warnings, information)
# XBD_LOG_BURST lines, plus the line reporting what the window before
# suppressed; an interval touches at most its length / window + 2 windows.
n0=$(grep -c "vbd/$dom/$a: " "$LOG")
t0=$(date +%s)
i=0
while [ $i -lt 40 ]; do
	i=$((i + 1))
	"$ASDOM" "$dom" xenstore-write "$fe/state" 1 && "$ASDOM" "$dom" xenstore-write "$fe/state" 3 ||
		fail "cannot write the frontend's state"
done
n=$(grep -c "vbd/$dom/$a: " "$LOG")
t1=$(date +%s)
burst=$(sed -n 's/^#define XBD_LOG_BURST \([0-9]*\).*/\1/p' "$top_srcdir/blkback/log/log.h")
window=$(sed -n 's/^#define XBD_LOG_WINDOW \([0-9]*\).*/\1/p' "$top_srcdir/blkback/log/log.h")
[ -n "$burst" ] && [ -n "$window" ] || fail "no XBD_LOG_BURST/XBD_LOG_WINDOW in blkback/log/log.h"
windows=$(( (t1 - t0 + 1) / window + 2 ))
max=$(( n0 + windows * (2 * burst + 1) ))
echo "$((n - n0)) log lines about the device during 40 failed connects in $((t1 - t0)) s ($windows windows: at most $((max - n0)))"
[ "$n" -le "$max" ] || bk_fail "$((n - n0)) log lines about one guest's failed connects in $((t1 - t0)) s (at most $((max - n0)))"
# Each failed connect logs two lines (the protocol, the refusal): fewer
# means some were suppressed, which a line must report (at the latest
# when the window ends); as many means the loop was slower than the limit.
if [ $((n - n0)) -lt 80 ]; then
	sim_wait_for 20 grep -q "vbd/$dom/$a: [0-9]* similar lines* suppressed" "$LOG" ||
		bk_fail "no line saying how many lines were suppressed"
	grep "suppressed" "$LOG"
else
	echo "no line needed suppressing: the connects came slower than the limit"
fi
bk_done
