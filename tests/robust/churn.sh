#!/bin/sh
# Churn: disks attached and detached, domains created and destroyed, all
# while I/O runs, ROBUST_CYCLES times each (20 in `make check`, 200 in
# `make check-robust`).  Throughout, domain V runs fio with verify=crc32c
# through nbdkit on a disk of the same xbd-back (must pass, 0 errors).
#  - attach/detach: xbd-sim disk add, a frontend (evilfront rw) writes and
#    reads back 32 pages (verified) and closes, xbd-sim disk remove (the backend must reach
#    Closed);
#  - create/destroy: a domain is created with a disk, rawfront runs a
#    verifying stress on it, and the domain is destroyed while the stress
#    is still running; xbd-back must tear the device down.
# The open fds and mappings of guest memory of xbd-back and its workers (of the churned domains:
# the victim's persistent grant cache fills up over time) must be back where they
# were after the warm-up, and its RSS may not grow by more than
# ROBUST_RSS_SLACK_KIB (default 4096; 16384 under ASan, with its
# quarantine cut down to 1 MiB).
. "$top_srcdir/tests/robust/lib.sh"
need_fio_nbd
bk_need tests/robust/evilfront
CYCLES=${ROBUST_CYCLES:-20}
SLACK=${ROBUST_RSS_SLACK_KIB:-4096}
if nm "$XBD_BACK" 2>/dev/null | grep -q __asan_init; then
	# ASan keeps freed memory in a quarantine (256 MiB by default): make it
	# small, so that RSS shows what xbd-back itself keeps.
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
	export ASAN_OPTIONS
	SLACK=${ROBUST_RSS_SLACK_KIB:-16384}
fi

V=$(new_domain)
RES_EXCLUDE_DOM=$V
head -c 16777216 /dev/urandom >"$WORK/v.img"
add_disk "$V" xvdb "$WORK/v.img" >/dev/null
C=$(new_domain --mem 512) || exit 1
truncate -s 8M "$WORK/c.img"
start_back
victim_start v "$V" xvdb 4m

attach_detach() {
	dev=$(add_disk "$C" 6000 "$WORK/c.img")
	wait_state "$C" "$dev" 2
	# evilfront's rw: few guest pages (a frontend process that exits leaks
	# the pages it granted from its simulated guest's memory)
	evil "$C" --dev "$dev" rw >"$WORK/ad.out" 2>&1 ||
		{ cat "$WORK/ad.out"; bk_fail "attach/detach cycle $1: I/O failed"; }
	"$XBD_SIM" disk remove "$SIMDIR" "$C" "$dev" --timeout 10 ||
		bk_fail "attach/detach cycle $1: the backend did not reach Closed"
}

create_destroy() {
	d=$(new_domain)
	# a fresh file each time: stress expects zeros
	rm -f "$WORK/d.img"
	truncate -s 8M "$WORK/d.img"
	dev=$(add_disk "$d" xvdb "$WORK/d.img")
	# (a simple command, not front: $! must be rawfront itself, for the kill)
	"$ASDOM" "$d" "$RAWFRONT" --dev "$dev" --qd 8 --secs 10 stress >"$WORK/cd.out" 2>&1 &
	sp=$!
	# (domids are reused: the connect of this cycle's frontend, not an earlier one's)
	sim_wait_for 10 grep -q "connected to .*/$d/$dev in" "$WORK/cd.out" ||
		bk_fail "create/destroy cycle $1: no connect"
	sleep 0.1
	"$XBD_SIM" domain destroy "$SIMDIR" "$d" || bk_fail "create/destroy cycle $1: domain destroy failed"
	# A destroyed domain's vCPUs stop at once: so does its frontend.
	{ kill -KILL "$sp" && wait "$sp"; } 2>/dev/null
	sim_wait_for 10 grep -q "vbd/$d/$dev: domain $d is \(gone\|dying\), tearing down" "$LOG" ||
		bk_fail "create/destroy cycle $1: xbd-back did not tear down domain $d's disk"
}

i=0
while [ $i -lt 3 ]; do i=$((i + 1)); attach_detach "warm-up $i"; create_destroy "warm-up $i"; done
before=$(res_settled)
t0=$(date +%s)
i=0
while [ $i -lt "$CYCLES" ]; do i=$((i + 1)); attach_detach $i; done
mid=$(res_settled)
i=0
while [ $i -lt "$CYCLES" ]; do i=$((i + 1)); create_destroy $i; done
after=$(res_settled)
echo "$CYCLES attach/detach and $CYCLES create/destroy cycles in $(( $(date +%s) - t0 )) s"
echo "xbd-back RSS KiB / fds / guest memory mappings: before $before, after attach/detach $mid, after create/destroy $after"
back_alive
victim_stop v
set -- $before
rss0=$1 fd0=$2 map0=$3
for snap in "$mid" "$after"; do
	set -- $snap
	[ "$2" = "$fd0" ] || {
		# Which process holds them: xbd-back, or a worker (its uid names its domain).
		for p in $(back_pids); do
			echo "$p: $(tr '\0' ' ' <"/proc/$p/cmdline"), $(ls "/proc/$p/fd" | wc -l) fds, $(grep Uid "/proc/$p/status")" >&2
		done
		bk_fail "xbd-back's open fds went from $fd0 to $2"
	}
	[ "$3" = "$map0" ] || bk_fail "xbd-back's guest memory mappings went from $map0 to $3"
	[ $(($1 - rss0)) -le "$SLACK" ] || bk_fail "xbd-back's RSS grew from $rss0 to $1 KiB (slack $SLACK)"
done
bk_done
