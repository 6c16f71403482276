#!/bin/sh
# tests/sim/disk-remove.sh: `xbd-sim disk remove` detaches like libxl:
# online=0 and state=5 on the backend, a wait for state 6, then the
# backend, frontend and /libxl directories go (empty parents too).  With
# no backend answering it gives up after --timeout, fails, and still
# removes everything; with a backend that closes it succeeds at once.
. "$top_srcdir/tests/lib/sim.sh"

sim_start
sim_env 0
tmp=$(mktemp -d) || fail "mktemp"
sim_on_exit "rm -rf '$tmp'"

[ "$("$XBD_SIM" domain create "$SIMDIR")" = 1 ] || fail "domain create"
be=/local/domain/0/backend/vbd/1/51728
fe=/local/domain/1/device/vbd/51728
lx=/libxl/1/device/vbd/51728

gone() {
	for p in "$@"; do
		if xenstore-read "$p" >/dev/null 2>&1; then fail "$p still exists"; fi
	done
}

# Nobody answers: fails after about the timeout, cleans up anyway.
"$XBD_SIM" disk add "$SIMDIR" 1 xvdb /img >/dev/null || fail "disk add"
t0=$(date +%s%N)
if "$XBD_SIM" disk remove "$SIMDIR" 1 51728 --timeout 1 2>"$tmp/err"; then
	fail "remove succeeded with no backend"
fi
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -ge 900 ] && [ "$ms" -lt 5000 ] || fail "timeout of 1 s took $ms ms"
grep -q "did not reach Closed" "$tmp/err" || fail "timeout message: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "more than one error line: $(cat "$tmp/err")"
gone $be $fe $lx /local/domain/0/backend
xenstore-read /local/domain/1/device >/dev/null || fail "remove took the guest's device/ directory"

# A backend that answers Closing with Closed, as libxl expects.
"$XBD_SIM" disk add "$SIMDIR" 1 xvdb /img >/dev/null || fail "disk add again"
(
	while :; do
		s=$(xenstore-read $be/state 2>/dev/null) || exit 1
		if [ "$s" = 5 ]; then
			xenstore-read $be/online >"$tmp/online"
			xenstore-write $be/state 6
			exit 0
		fi
		sleep 0.02
	done
) &
bpid=$!
sim_on_exit "kill $bpid"
t0=$(date +%s%N)
"$XBD_SIM" disk remove "$SIMDIR" 1 xvdb --timeout 10 || fail "remove with a closing backend failed"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -lt 3000 ] || fail "remove took $ms ms with a backend that closes"
wait $bpid || fail "the backend loop did not see state 5"
[ "$(cat "$tmp/online")" = 0 ] || fail "online was not 0 when state became 5"
gone $be $fe $lx

# A backend already Closed is not pushed back to Closing; nothing to wait for.
"$XBD_SIM" disk add "$SIMDIR" 1 xvdb /img >/dev/null || fail "disk add a third time"
xenstore-write $be/state 6
watch_out=$tmp/watch
xenstore-watch $be/state >"$watch_out" 2>&1 &
wpid=$!
sim_on_exit "kill $wpid"
sim_wait_for 5 grep -q state "$watch_out" || fail "xenstore-watch did not start"
"$XBD_SIM" disk remove "$SIMDIR" 1 51728 --timeout 5 || fail "remove of a closed backend"
sleep 0.2
kill $wpid
# Watch events: the initial one and the removal; a write of 5 would add a third.
[ "$(grep -c "$be/state" "$watch_out")" -le 2 ] || fail "state was rewritten: $(cat "$watch_out")"
gone $be $fe $lx

# The other disks of the domain stay.
"$XBD_SIM" disk add "$SIMDIR" 1 xvdb /img >/dev/null || fail "add b"
"$XBD_SIM" disk add "$SIMDIR" 1 xvdc /img >/dev/null || fail "add c"
"$XBD_SIM" disk remove "$SIMDIR" 1 xvdb --timeout 0 2>/dev/null
[ "$(xenstore-read /local/domain/0/backend/vbd/1/51744/state)" = 1 ] || fail "xvdc was touched"

# No such disk.
if "$XBD_SIM" disk remove "$SIMDIR" 1 xvdz 2>"$tmp/err"; then fail "removed a missing disk"; fi
grep -q "has no vbd" "$tmp/err" || fail "missing disk: $(cat "$tmp/err")"
exit 0
