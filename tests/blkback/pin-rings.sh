#!/bin/sh
# pin-rings on the simulator (where it pins threads only: the simulator
# has no interrupts; the interrupts' move is check-xen's xbd-ring-cpu step
# and test-ringcpu's):
#  - pin-rings = 1: a disk with two queues gets its rings on two CPUs, a
#    third ring (another domain's disk) on the least used one; xbdctl
#    gives each ring's CPU, and the thread serving each ring (in its
#    domain's worker, or in xbd-back itself with workers = 0) may run
#    there only: its worker's seccomp filter allows it;
#  - a ring that ends gives its CPU back: the next one takes it;
#  - pin-rings = auto (the default) and 0 pin nothing on the simulator:
#    cpu is null and no thread is bound to one CPU.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
[ "$(nproc)" -ge 2 ] || skip "one CPU: there is nothing to spread rings over"
CTL=$SIMDIR/xbd-back.0.sock
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO

A=$(new_domain)
B=$(new_domain)
truncate -s 16M "$WORK/a.img" "$WORK/b.img"
da=$(add_disk "$A" xvdb "$WORK/a.img")
db=$(add_disk "$B" xvdb "$WORK/b.img")

# cpus DOM DEV: the CPUs of that disk's rings, one line
cpus() {
	"$XBDCTL" --socket "$CTL" stats --json "vbd/$1/$2" |
		jq -r '[.devices[0].rings[].ring.cpu | tostring] | join(" ")'
}
# pinned: how many threads of xbd-back and its workers may run on one CPU
# only, and which, as "CPU CPU ..." sorted
pinned() {
	for p in $(back_pids); do
		for t in /proc/$p/task/*; do
			sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9][0-9]*\)$/\1/p' "$t/status" 2>/dev/null
		done
	done | sort -n | tr '\n' ' ' | sed 's/ $//'
}

# run MODE-ARGS...: the three rings with those options, checked
run() {
	rm -f "$WORK/go" "$WORK"/p*.out
	start_back --log-level verbose "$@"
	sim_wait_for 10 test -S "$CTL" || bk_fail "xbd-back did not start ($*)"
	front "$A" --dev "$da" --queues 2 pause >"$WORK/pa.out" 2>&1 &
	pa=$!
	sim_wait_for 10 grep -q paused "$WORK/pa.out" || { cat "$WORK/pa.out"; bk_fail "guest A did not connect"; }
	front "$B" --dev "$db" pause >"$WORK/pb.out" 2>&1 &
	pb=$!
	sim_wait_for 10 grep -q paused "$WORK/pb.out" || { cat "$WORK/pb.out"; bk_fail "guest B did not connect"; }
	ca=$(cpus "$A" "$da")
	cb=$(cpus "$B" "$db")
}

finish() {
	touch "$WORK/go"
	wait "$pa" || { cat "$WORK/pa.out"; bk_fail "guest A's I/O failed ($*)"; }
	wait "$pb" || { cat "$WORK/pb.out"; bk_fail "guest B's I/O failed ($*)"; }
	stop_back || bk_fail "xbd-back exited with status $? ($*)"
}

for w in 0 1; do
	if [ $w = 1 ] && [ "$(id -u)" != 0 ]; then
		echo "not root: workers = 1 not checked (workers change uid)"
		continue
	fi
	run --workers $w --pin-rings 1
	set -- $ca
	[ $# = 2 ] && [ "$1" != "$2" ] || bk_fail "workers=$w: A's two rings are on CPUs '$ca', not two CPUs"
	case $cb in
	"$1" | "$2") ;;
	*) bk_fail "workers=$w: B's ring is on CPU '$cb', not one of A's ($ca)" ;;
	esac
	want=$(printf '%s\n' $ca $cb | sort -n | tr '\n' ' ' | sed 's/ $//')
	# each thread binds itself when it starts
	i=0
	while got=$(pinned) && [ "$got" != "$want" ] && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ "$got" = "$want" ] || bk_fail "workers=$w: threads bound to one CPU: '$got', not the rings' '$want'"
	grep -q "cannot run on CPU" "$LOG" && bk_fail "workers=$w: a ring thread could not be pinned"
	echo "ok: workers=$w: A's rings on CPUs $ca, B's on $cb; the threads that serve them bound there"
	# B's ring ends; a new connection of B takes the CPU it gave back.
	touch "$WORK/go"
	wait "$pb" || { cat "$WORK/pb.out"; bk_fail "guest B's I/O failed"; }
	rm -f "$WORK/go"
	# emptied here: the background job's own redirection may come after the
	# first look for "paused", which would find the first connection's
	: >"$WORK/pb.out"
	front "$B" --dev "$db" pause >"$WORK/pb.out" 2>&1 &
	pb=$!
	sim_wait_for 10 grep -q paused "$WORK/pb.out" || { cat "$WORK/pb.out"; bk_fail "guest B did not connect again"; }
	c2=$(cpus "$B" "$db")
	[ "$c2" = "$cb" ] || bk_fail "workers=$w: B's new ring is on CPU $c2, not the freed $cb"
	finish "workers=$w"
done

for p in auto 0; do
	if [ $p = auto ]; then run; else run --pin-rings 0; fi
	[ "$ca $cb" = "null null null" ] || bk_fail "pin-rings=$p: rings on CPUs '$ca $cb', not null"
	got=$(pinned)
	[ -z "$got" ] || bk_fail "pin-rings=$p: threads bound to CPUs $got"
	finish "pin-rings=$p"
	echo "ok: pin-rings=$p pins nothing on the simulator"
done
bk_done
