#!/bin/sh
# Closing a frontend whose backend has died (xbd-back SIGKILLed while
# nbdkit xbd serves the vbd) takes one timeout, not one for Closing and
# another for Closed: nbdkit timeout=3 exits within 5 s of SIGTERM.  With
# the backend alive, close is quick (the backend answers at once).
. "$top_srcdir/tests/blkfront/front-lib.sh"
need_nbdkit
front_setup
fe_connected() {
	[ "$(xs read "/local/domain/$DOMU/device/vbd/$DEVID/state" 2>/dev/null)" = 4 ]
}

# serve (socket nbd-$2.sock), run $1, then stop nbdkit (SIGTERM); MS: how long it took to exit
serve_and_stop() {
	"$ASDOM" "$DOMU" env $NBDKIT_PRELOAD nbdkit -f -U "$WORK/nbd-$2.sock" -P "$WORK/nbd-$2.pid" "$PLUGIN" vdev=xvdb timeout=3 \
		>>"$WORK/nbdkit.log" 2>&1 &
	job=$!
	sim_wait_for 10 fe_connected || bk_fail "nbdkit never connected"
	sim_wait_for 10 test -s "$WORK/nbd-$2.pid" || bk_fail "nbdkit does not serve"
	# the pid of nbdkit itself, not of the shell that started it
	nbd=$(cat "$WORK/nbd-$2.pid")
	sim_on_exit "kill -9 $nbd 2>/dev/null"
	$1
	t0=$(date +%s%N)
	kill $nbd
	n=0
	while kill -0 $nbd 2>/dev/null && [ $n -lt 300 ]; do
		sleep 0.05
		n=$((n + 1))
	done
	kill -9 $nbd 2>/dev/null
	wait $job 2>/dev/null
	MS=$(( ($(date +%s%N) - t0) / 1000000 ))
}

serve_and_stop true alive
echo "close with the backend alive: $MS ms"
[ "$MS" -lt 2000 ] || bk_fail "close took $MS ms with a live backend"

bstate "$DOMU" "$DEVID" | sed "s/^/backend state after close: /"
serve_and_stop "stop_back KILL" gone
echo "close with the backend gone: $MS ms"
cat "$WORK/nbdkit.log"
[ "$MS" -lt 5000 ] || bk_fail "close took $MS ms with the backend gone (timeout=3)"
exit 0
