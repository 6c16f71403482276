#!/bin/sh
# An NBD server that accepts and never completes the handshake holds up no
# disk but its own (issue 34).  Its disk's open runs on a thread of its
# own for nbd-connect-timeout-ms (5 s), which the main loop never waits
# for (it did: every other guest's connect and xbdctl waited 5 s, again at
# each of the stalled guest's frontend changes).  Asserted, while the
# stalled disk's guest cycles its frontend's state:
#  - another guest's disk connects in under 1 s, and the control socket
#    answers in under 100 ms (tests/robust/lib.sh, innocent_figures);
#  - xbdctl list shows the stalled disk "opening", then "failed" with the
#    error and when it is tried next, in InitWait, not Closed;
#  - a failed open is said once (one line per change of outcome), and is
#    tried again with backoff;
#  - SIGTERM ends the daemon in under 2 s.
. "$top_srcdir/tests/robust/lib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
CTL=$SIMDIR/xbd-back.0.sock

python3 "$top_srcdir/tests/robust/nbd-stall.py" "$WORK/stall.sock" silent 2>"$WORK/stall.log" &
spid=$!
sim_on_exit "kill $spid 2>/dev/null"
sim_wait_for 10 test -S "$WORK/stall.sock" || bk_fail "the stalling server did not start"
A=$(new_domain)
B=$(new_domain)
new_disk "$WORK/b.img" 16M
db=$(add_disk "$B" xvdb "$WORK/b.img")
start_back --log-level verbose
wait_state "$B" "$db" 2
front_ok "$B" "$db" rw
da=$(add_disk "$A" xvdb "nbd+unix:///?socket=$WORK/stall.sock")
fe=/local/domain/$A/device/vbd/$da
sim_wait_for 5 sh -c "'$XBDCTL' --socket '$CTL' list | grep -q '^vbd/$A/$da .* opening '" &&
	opening=yes || opening="no: $("$XBDCTL" --socket "$CTL" list)"

# A's guest: its frontend's state cycled for 10 s (each change once cost another open).
cat >"$WORK/cycle.sh" <<EOS
#!/bin/sh
end=\$((\$(date +%s) + 10))
while [ \$(date +%s) -lt \$end ]; do
	xenstore-write "$fe/state" 1 && xenstore-write "$fe/state" 3
	sleep 0.2
done
EOS
"$ASDOM" "$A" sh "$WORK/cycle.sh" >"$WORK/cycle.out" 2>&1 &
cyc=$!
sim_on_exit "kill $cyc 2>/dev/null"
ctl_answers 8
innocent_connects "$B" "$db" 8
ctl_answers_wait
wait "$cyc"
innocent_figures "A's NBD server did not handshake"
[ "$opening" = yes ] || bk_fail "xbdctl list did not show A's disk opening: $opening"

sim_wait_for 10 sh -c "'$XBDCTL' --socket '$CTL' list | grep -q '^vbd/$A/$da .* failed '" ||
	bk_fail "xbdctl list does not show A's failed open"
"$XBDCTL" --socket "$CTL" list >"$WORK/list"
cat "$WORK/list"
grep -q "^vbd/$A/$da: its storage did not open: cannot open '.*': Connection timed out (.* tr[yies]*; the next in [0-9]* s)" \
	"$WORK/list" || bk_fail "xbdctl list does not say why A's storage did not open, and when again"
"$XBDCTL" --socket "$CTL" --json list "vbd/$A/$da" >"$WORK/list.json"
[ "$(jq -r '.devices[0].storage.state' "$WORK/list.json")" = failed ] ||
	bk_fail "the JSON does not say the open failed: $(cat "$WORK/list.json")"
[ "$(bstate "$A" "$da")" = 2 ] || bk_fail "A's disk is in state $(bstate "$A" "$da"), not InitWait"
n=$(grep -c "vbd/$A/$da: cannot open" "$LOG")
[ "$n" = 1 ] || bk_fail "A's failed open was said $n times, not once"
n=$(grep -c "stall.sock: cannot connect to the NBD server" "$LOG")
[ "$n" = 1 ] || bk_fail "the engine said the stalled server $n times, not once"
back_alive
sigterm_within_2s
bk_done
