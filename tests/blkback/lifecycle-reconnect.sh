#!/bin/sh
# xbd-back: a frontend that closes (Closing, Closed), resets to
# Initialising and connects again with new rings gets a working disk, and
# the old ring is no longer mapped once the backend is Closed.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a reconnect" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "reconnect failed"; }
[ "$(grep -c "vbd/$dom/$a: connected" "$LOG")" -ge 2 ] || bk_fail "did not connect twice"

# A frontend that skips Initialised and goes straight to Connected.
run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a --state 4 rw" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "frontend skipping Initialised was not served"; }
bk_done
