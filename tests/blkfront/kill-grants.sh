#!/bin/sh
# xbd-back killed (SIGKILL) in the middle of xbd-front bench, a new one
# started: the killed daemon's grant mappings go with it, as the kernel's
# gntdev unmaps a process's grants when it exits, so at the end xbd-front
# ends every grant and frees every page.  The simulator used to keep a
# dead process's pins until its whole domain (dom0) was destroyed, and
# xbd-front said "backend still maps 17 grant(s) of queue 0".  Twice:
# with persistent grants (mapped for the ring's life) and without (mapped
# per request).
. "$top_srcdir/tests/blkfront/front-lib.sh"
front_setup

for persistent in 1 0; do
	"$ASDOM" "$DOMU" "$XBD_FRONT" bench --vdev xvdb --queues 2 --persistent $persistent \
		--rw randrw --bs 16k --iodepth 8 --runtime 3 --verify >"$WORK/bench.out" 2>&1 &
	bench=$!
	sim_on_exit "kill $bench"
	sim_wait_for 10 state_is "$DOMU" "$DEVID" 4 || bk_fail "xbd-front never connected"
	sleep 1.5
	stop_back KILL
	start_back
	front_bench_done $bench "across a kill -9 of xbd-back (persistent $persistent)"
	if grep -q 'still maps' "$WORK/bench.out"; then
		bk_fail "the killed xbd-back's grant mappings outlived it (persistent $persistent)"
	fi
	sim_wait_for 10 state_is "$DOMU" "$DEVID" 6 || bk_fail "xbd-front did not close"
done
exit 0
