#!/bin/sh
# xbd-back: a guest cannot use up host-wide kernel resources by connecting
# big rings.  Four queues of 16-page rings (512 requests each) get aio
# contexts of at most 128 events each, not one event per ring slot (513
# each: eight such disks used to exhaust the host's fs.aio-max-nr of
# 65536); the disk still works at full queue depth.  Measured from the
# daemon's own [aio] mappings in /proc/PID/maps (its workers' too: they
# serve the rings), which other tests running in parallel cannot disturb.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 64M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
start_back --max-ring-order 4 --max-queues 4
wait_state "$dom" "$a" 2
aio_kb() {
	_s=0
	for _r in $(for _p in $(back_pids); do awk '/\[aio\]/ { print $1 }' "/proc/$_p/maps"; done); do
		_s=$((_s + 0x${_r#*-} - 0x${_r%-*}))
	done
	echo $((_s / 1024))
}
nr0=$(cat /proc/sys/fs/aio-nr)
kb0=$(aio_kb)
front "$dom" --dev "$a" --order 4 --queues 4 connect >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; bk_fail "cannot connect 4 queues of 16-page rings"; }
grep -q "vbd/$dom/$a: connected: 4 queues, 16 ring pages" "$LOG" || bk_fail "not connected with 4 queues of 16 pages"
kb1=$(aio_kb)
nr1=$(cat /proc/sys/fs/aio-nr)
per=$(( (kb1 - kb0) / 4 ))
echo "aio contexts: $((kb1 - kb0)) KiB of [aio] mappings for 4 rings ($per KiB a ring); host aio-nr $nr0 -> $nr1"
[ "$kb1" -gt "$kb0" ] || bk_fail "no aio context found in /proc/PID/maps of xbd-back and its workers"
# 128 events: 3 pages (12 KiB) on x86-64; 513 events took 9 pages (36 KiB).
[ "$per" -le 16 ] || bk_fail "each ring's aio context takes $per KiB: more than 128 events"
bk_done
