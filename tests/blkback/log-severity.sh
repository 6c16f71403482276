#!/bin/sh
# xbd-back: log severity means something.  With stderr as the journal
# (JOURNAL_STREAM), failures carry an error or warning priority: "cannot
# connect to xenstore" and "cannot connect to the frontend" are errors
# (<3>), a request refused is a warning (<4>), and a device connecting is
# information (<6>).
. "$top_srcdir/tests/blkback/common.sh"

J=$WORK/journal
: >"$J"
JOURNAL_STREAM=$(stat -c %d:%i "$J")
export JOURNAL_STREAM
# No xenstore to talk to.
(sim_env 0 && XENSTORED_PATH=$WORK/nowhere exec "$XBD_BACK" --types vbd --control none) 2>>"$J" &&
	bk_fail "xbd-back started without a xenstore"
grep -q "^<3>xbd-back: cannot connect to xenstore" "$J" || { cat "$J"; bk_fail "no error-priority line for the missing xenstore"; }

dom=$(new_domain)
new_disk "$WORK/a.img" 4M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
(sim_env 0 && exec "$XBD_BACK" --types vbd --control none) 2>>"$J" &
BACK_PID=$!
wait_state "$dom" "$a" 2
fe=/local/domain/$dom/device/vbd/$a
# A frontend whose ring cannot be mapped: the connect fails.
"$ASDOM" "$dom" xenstore-write "$fe/ring-ref" 999999 "$fe/event-channel" 1 "$fe/state" 3 ||
	fail "cannot write the frontend keys"
wait_state "$dom" "$a" 5
"$ASDOM" "$dom" xenstore-write "$fe/state" 6
wait_state "$dom" "$a" 6
"$ASDOM" "$dom" xenstore-rm "$fe/ring-ref" "$fe/event-channel"
front "$dom" --dev "$a" beyond-end >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "beyond-end scenario failed"; }
stop_back || bk_fail "xbd-back exited with status $?"
unset JOURNAL_STREAM
cat "$J"
grep -q "^<3>xbd-back: vbd/$dom/$a: cannot connect to the frontend, closing" "$J" &&
	bk_fail "the failed connect does not say why"
grep -q "^<3>xbd-back: vbd/$dom/$a: cannot connect to the frontend ([A-Za-z/ ]*), closing" "$J" ||
	bk_fail "the failed connect is not an error that says why"
grep -q "^<4>xbd-back: vbd/$dom/$a: cannot map the ring" "$J" || bk_fail "the ring that did not map is not a warning"
grep -q "^<4>xbd-back: vbd/$dom/$a: request refused" "$J" || bk_fail "a refused request is not a warning"
grep -q "^<6>xbd-back: vbd/$dom/$a: connected" "$J" || bk_fail "connected is not information"
# Nothing that failed or was refused is information.
grep "^<6>" "$J" | grep -i "cannot\|refused\|error\|fail" && bk_fail "a failure logged as information"
cp "$J" "$LOG"
bk_done
