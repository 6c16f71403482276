#!/bin/sh
# xbd-back: a uring disk's ring thread waits in its own io_uring (the
# event channel and the stop eventfd polled by sqes there; the requests
# consumed before the wait submitted by the same io_uring_enter), so at
# queue depth 1 without polling a request costs at most about two
# io_uring_enter (submit and wait for the completion; wait for the next
# notification) and no epoll_wait.  Before, the ring thread slept in
# epoll_wait (0.71 a request here) beside one io_uring_enter to submit,
# and on real Xen with O_DIRECT twice.  Counted by strace -f -c on
# xbd-back during 4k random reads at
# QD1 (the aio disk beside it is printed as the control: on a file its
# reads complete inside io_submit and its ring thread sleeps less).
. "$top_srcdir/tests/blkback/common.sh"
command -v strace >/dev/null 2>&1 || skip "strace is not installed"
"$XBD_BACK" --check-config --control none --disk "x:engine=uring" >/dev/null 2>"$WORK/cc.err" ||
	skip "xbd-back was built without liburing: $(cat "$WORK/cc.err")"

# calls ENGINE: "REQS ENTERS EPOLLS" during a QD1 run on ENGINE
calls() {
	: >"$LOG"
	dom=$(new_domain)
	# written, not sparse: a read of a hole completes inside io_submit
	dd if=/dev/urandom of="$WORK/$1.img" bs=1M count=64 status=none
	a=$(add_disk "$dom" xvdb "$WORK/$1.img")
	start_back --workers 0 --engine "$1" --poll-max-ns 0
	wait_state "$dom" "$a" 2
	strace -f -c -p "$BACK_PID" -o "$WORK/$1.strace" 2>"$WORK/$1.strace-err" &
	st=$!
	i=0
	while [ $i -lt 100 ] && ! grep -q attached "$WORK/$1.strace-err" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
	done
	"$ASDOM" "$dom" "$RAWFRONT" --dev "$a" --qd 1 --secs 1 bench >"$WORK/$1.out" 2>&1 ||
		{ cat "$WORK/$1.out"; kill "$st"; bk_fail "$1: the QD1 run failed"; }
	kill -INT "$st"
	wait "$st" || :
	stop_back
	grep -q "vbd/$dom/$a: opened .*($1 engine" "$LOG" || bk_fail "the disk was not served by the $1 engine"
	reqs=$(sed -n 's/^bench: .* reqs=\([0-9]*\) .*/\1/p' "$WORK/$1.out")
	[ -n "$reqs" ] && [ "$reqs" -ge 200 ] || bk_fail "$1: too few requests: ${reqs:-none}"
	# strace -c: "% time seconds usecs/call calls errors syscall"
	enters=$(awk '$NF == "io_uring_enter" { n += $4 } END { print n + 0 }' "$WORK/$1.strace")
	epolls=$(awk '$NF == "epoll_wait" || $NF == "epoll_pwait" { n += $4 } END { print n + 0 }' "$WORK/$1.strace")
	echo "$1: $reqs requests, ${enters:-0} io_uring_enter, $epolls epoll_wait" >&2
	echo "$reqs ${enters:-0} $epolls"
}

set -- $(calls aio)
: # the control: printed, not judged (its ring thread may find the next request without sleeping)
set -- $(calls uring)
# the main thread's own epoll_wait (xenstore, the control socket) is a few
[ $(($3 * 100 / $1)) -le 10 ] ||
	bk_fail "uring: $3 epoll_wait for $1 requests (at most 0.1 a request): the ring thread does not wait in the ring"
[ $(($2 * 100 / $1)) -le 230 ] ||
	bk_fail "uring: $2 io_uring_enter for $1 requests (at most 2.3 a request)"
bk_done
