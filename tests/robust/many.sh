#!/bin/sh
# Many disks at once: ROBUST_DISKS disks (8 in `make check`, 64 in
# `make check-robust`) over several guests, all attached to one xbd-back
# and all doing verified random I/O (rawfront stress: reads checked against
# what was written) at the same time.  Every one must pass; then all are
# detached (each backend reaches Closed) and xbd-back's fds and guest
# memory mappings are back to what they were before the first attach, and
# once the guests are destroyed, to what they were before they existed
# (their memory, grant and Xen files closed and unmapped).
. "$top_srcdir/tests/robust/lib.sh"
N=${ROBUST_DISKS:-8}
PER=8 # disks per guest

start_back
sleep 0.3
nodoms=$(res_settled)
i=0
while [ $i -lt "$N" ]; do new_domain >>"$WORK/doms"; i=$((i + PER)); done
sleep 0.3
base=$(res_settled)
i=0
while [ $i -lt "$N" ]; do
	if [ $((i % PER)) = 0 ]; then dom=$(sed -n "$((i / PER + 1))p" "$WORK/doms"); fi
	truncate -s 8M "$WORK/m$i.img"
	dev=$(add_disk "$dom" $((7000 + i)) "$WORK/m$i.img")
	echo "$dom $dev" >>"$WORK/disks"
	i=$((i + 1))
done
while read -r dom dev; do wait_state "$dom" "$dev" 2; done <"$WORK/disks"
pids=
i=0
while read -r dom dev; do
	"$ASDOM" "$dom" "$RAWFRONT" --dev "$dev" --qd 4 --secs 2 stress >"$WORK/s$i.out" 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done <"$WORK/disks"
sim_on_exit "kill $pids"
bad=0
for p in $pids; do wait "$p" || bad=$((bad + 1)); done
[ $bad = 0 ] || { cat "$WORK"/s*.out | grep -v ": ok\|verified\|as expected" | head -20; bk_fail "$bad of $N disks failed their verified I/O"; }
total=$(cat "$WORK"/s*.out | sed -n 's/.*stress: \([0-9]*\) requests.*/\1/p' | awk '{ s += $1 } END { print s }')
echo "$N disks at once: $total verified requests in 2 s, all passed"
[ "$(grep -c "connected:" "$LOG")" -ge "$N" ] || bk_fail "not every disk connected"
during=$(res_snapshot)
while read -r dom dev; do
	"$XBD_SIM" disk remove "$SIMDIR" "$dom" "$dev" --timeout 10 || bk_fail "disk $dom/$dev did not reach Closed"
done <"$WORK/disks"
after=$(res_settled)
echo "xbd-back RSS KiB / fds / guest memory mappings: before $base, with $N disks $during, after detaching $after"
# Nothing per disk or per ring may stay, nor the guests' memory, grant
# and Xen files: the simulator's platform layer keeps a guest open only
# while something (a mapping, an event channel) uses it.
ndoms=$(wc -l <"$WORK/doms")
set -- $base
fd0=$2 map0=$3
set -- $after
[ "$2" -le "$fd0" ] || bk_fail "xbd-back's open fds went from $fd0 to $2 ($ndoms guests)"
[ "$3" -le "$map0" ] || bk_fail "xbd-back's guest memory mappings went from $map0 to $3 ($ndoms guests)"
while read -r dom; do "$XBD_SIM" domain destroy "$SIMDIR" "$dom" || fail "domain destroy failed"; done <"$WORK/doms"
gone=$(res_settled)
echo "after destroying the $ndoms guests: $gone (before they existed: $nodoms)"
set -- $nodoms
fd0=$2 map0=$3
set -- $gone
# Nothing of the destroyed guests may stay open: their memory, grant and
# Xen files were kept only while xbd-back talked to them.
[ "$2" -le "$fd0" ] || bk_fail "xbd-back keeps $(( $2 - fd0 )) fds of destroyed guests open"
[ "$3" -le "$map0" ] || bk_fail "xbd-back still maps the memory of destroyed guests ($map0 mappings before, $3 after)"
back_alive
bk_done
