#!/bin/sh
# A worker killed for a missed deadline while its guest's disk connects
# costs that guest a pause, not its disk.  XBD_TEST_WORKER_MISBEHAVE=
# DOMID:silent-once (--enable-test-hooks) makes the domain's first worker
# answer nothing once it said READY, so its rings' start is never
# answered: it is killed at the deadline and the supervisor starts a new
# one.  The connect must start again with the new worker and the disk
# reach Connected and serve I/O; before, the device was closed ("cannot
# connect to the frontend (No such process), closing") and a guest that
# waited for it, GRUB in check-xen under a loaded host, waited forever.
. "$top_srcdir/tests/robust/lib.sh"
misbehave_start silent-once --workers 1 --log-level verbose
front_ok "$A" "$da" rw
grep -q "worker of domain $A (pid [0-9]*) did not answer" "$LOG" ||
	bk_fail "A's first worker was not killed for its silence (the hook did not bite)"
grep -q "vbd/$A/$da: its worker ended before its rings started: connecting again" "$LOG" ||
	bk_fail "no line saying A's disk connects again with a new worker"
grep -q "vbd/$A/$da: cannot connect to the frontend" "$LOG" &&
	bk_fail "A's disk was closed after its worker was killed"
back_alive
front_ok "$B" "$db" rw
bk_done
