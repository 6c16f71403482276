#!/bin/sh
# With stderr on the journal (JOURNAL_STREAM), every line about a device
# reaches the journal's native socket (a stand-in here, XBD_TEST_JOURNAL_SOCKET)
# with structured fields, so that journalctl DOMID=5 finds a guest's
# lines: DOMID=, DEVID=, DEVICE= (TYPE/DOMID/DEVID) and DOMAIN_NAME= (the
# guest's name, escaped as the log escapes, one line), XBD_DEVICE= as
# before; the MESSAGE stays the text stderr would have had.  A daemon
# line has none of them; a line of a guest's worker (workers = 1) has
# them too.
. "$top_srcdir/tests/blkback/common.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"

A=$(new_domain --name web1)
B=$(new_domain --name placeholder)
xs write "/local/domain/$B/name" "$(printf 'db\\\\\nx')"
new_disk "$WORK/a.img" 4M
new_disk "$WORK/b.img" 4M
a=$(add_disk "$A" xvdb "$WORK/a.img")
b=$(add_disk "$B" xvdb "$WORK/b.img")
journal_listen
: >>"$LOG"
JOURNAL_STREAM=$(stat -c '%d:%i' "$LOG") XBD_TEST_JOURNAL_SOCKET=$WORK/journal.sock
export JOURNAL_STREAM XBD_TEST_JOURNAL_SOCKET
start_back --types vbd
unset JOURNAL_STREAM XBD_TEST_JOURNAL_SOCKET
wait_state "$A" "$a" 2
wait_state "$B" "$b" 2

# msg TEXT: the file of the first message whose MESSAGE starts with TEXT.
msg() {
	sim_wait_for 10 sh -c "grep -l -- 'MESSAGE=$1' '$WORK'/msg.* >'$WORK/m'" ||
		bk_fail "no '$1' line on the journal's socket"
	head -1 "$WORK/m"
}
m=$(msg "vbd/$A/$a: opened ")
for f in "DOMID=$A" "DEVID=$a" "DEVICE=vbd/$A/$a" "DOMAIN_NAME=web1" "XBD_DEVICE=vbd/$A/$a" \
	"PRIORITY=6" "SYSLOG_IDENTIFIER=xbd-back"; do
	grep -qxF "$f" "$m" || { cat "$m"; bk_fail "no $f field"; }
done
grep -qx "MESSAGE=vbd/$A/$a: opened $WORK/a.img (.*)" "$m" || { cat "$m"; bk_fail "the text changed"; }
m=$(msg "vbd/$B/$b: opened ")
grep -qxF 'DOMAIN_NAME=db\x5c\x0ax' "$m" || { cat "$m"; bk_fail "the name is not escaped to one line"; }
echo "a device's line: DOMID, DEVID, DEVICE, DOMAIN_NAME, the text as it was"
m=$(msg "started: ")
grep -q "^DOMID=\|^DEVID=\|^DEVICE=\|^DOMAIN_NAME=" "$m" && { cat "$m"; bk_fail "a daemon line with a device's fields"; }
echo "a daemon line: none of them"
stop_back || bk_fail "xbd-back exited $?"

# A worker's lines go through its main process, and get the fields too.
rm -f "$WORK"/msg.*
JOURNAL_STREAM=$(stat -c '%d:%i' "$LOG") XBD_TEST_JOURNAL_SOCKET=$WORK/journal.sock
export JOURNAL_STREAM XBD_TEST_JOURNAL_SOCKET
start_back --types vbd --workers 1
unset JOURNAL_STREAM XBD_TEST_JOURNAL_SOCKET
front_ok "$A" "$a" rw
m=$(msg "vbd/$A/$a: connected: ")
for f in "DOMID=$A" "DEVID=$a" "DEVICE=vbd/$A/$a" "DOMAIN_NAME=web1"; do
	grep -qxF "$f" "$m" || { cat "$m"; bk_fail "worker mode: no $f field"; }
done
echo "worker mode: the same fields"
bk_done
