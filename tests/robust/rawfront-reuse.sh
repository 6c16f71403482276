#!/bin/sh
# A test frontend (rawfront) used again and again in one guest, as the
# robustness tests do, must leave the guest as it found it:
#  - 30 runs in one domain all pass: each ends its grants and frees its
#    pages on exit (the pool is 1200 grants, the table 32768: without
#    that the 28th run fails "cannot share the data pages");
#  - a run with 1 queue after one with 2 queues and 4 ring pages on the
#    same vbd connects: the stale queue-N and ring-page-order keys are
#    cleared, or the backend sees a layout nobody wrote and closes;
#  - stress whose domain is destroyed mid-run fails (non-zero) within its
#    timeout instead of waiting forever.
. "$top_srcdir/tests/robust/lib.sh"

G=$(new_domain)
truncate -s 16M "$WORK/a.img" "$WORK/b.img"
a=$(add_disk "$G" xvdb "$WORK/a.img")
b=$(add_disk "$G" xvdc "$WORK/b.img")
start_back
wait_state "$G" "$a" 2
wait_state "$G" "$b" 2

i=0
while [ $i -lt 30 ]; do
	front "$G" --dev "$a" rw >"$WORK/rw.out" 2>&1 ||
		{ cat "$WORK/rw.out"; bk_fail "run $((i + 1)) of rawfront in one domain failed"; }
	i=$((i + 1))
done
echo "ok: 30 rawfront runs in one domain"

front "$G" --dev "$a" --queues 2 --order 2 rw >"$WORK/q2.out" 2>&1 ||
	{ cat "$WORK/q2.out"; bk_fail "rawfront with 2 queues and 4 ring pages failed"; }
xs exists "/local/domain/$G/device/vbd/$a/queue-1" || bk_fail "the 2-queue run wrote no queue-1 keys"
front "$G" --dev "$a" rw >"$WORK/q1.out" 2>&1 ||
	{ cat "$WORK/q1.out"; bk_fail "rawfront with 1 queue after one with 2 queues failed"; }
xs exists "/local/domain/$G/device/vbd/$a/queue-1" && bk_fail "stale queue-1 keys left in the frontend directory"
echo "ok: 1 queue after 2 queues on the same vbd"

t0=$(date +%s)
(front "$G" --dev "$b" --secs 60 stress >"$WORK/stress.out" 2>&1; echo $? >"$WORK/stress.rc") &
sim_on_exit "kill $!"
sim_wait_for 10 grep -q connected "$WORK/stress.out" || { cat "$WORK/stress.out"; bk_fail "stress did not start"; }
sleep 0.5
"$XBD_SIM" domain destroy "$SIMDIR" "$G" || fail "domain destroy failed"
sim_wait_for 30 test -s "$WORK/stress.rc" || bk_fail "stress still runs 30 s after its domain was destroyed"
[ "$(cat "$WORK/stress.rc")" != 0 ] || { cat "$WORK/stress.out"; bk_fail "stress passed although its domain was destroyed mid-run"; }
echo "ok: stress failed $(( $(date +%s) - t0 )) s after starting, its domain destroyed after ~1 s:"
tail -n 1 "$WORK/stress.out"
back_alive
bk_done
