# tests/blkfront/front-lib.sh: the fixture of the blkfront tests: a
# simulated host, guest domain DOMU (1) with a file-backed vbd served by
# xbd-back in dom0, for xbd-front or nbdkit to run against as the guest
# ("$ASDOM" "$DOMU" CMD...).  Every helper (start_back, stop_back,
# add_disk, state_is, bk_fail, need_nbdkit ...) is tests/lib/xbd.sh's; see
# tests/README.md.
#
#   front_need                          skip unless xbd-back and xbd-front
#                                       are built (front_setup checks too)
#   front_setup [disk add options...]   host + domain 1 + xvdb (16 MiB of
#                                       random data in $DISK) + xbd-back
#                                       (with $BACK_OPTS) in InitWait; sets
#                                       WORK, LOG, DOMU, DEVID, DISK
#   front_bench_done PID WHAT           wait for xbd-front bench --verify
#                                       (PID, output in $WORK/bench.out),
#                                       print it, fail unless it exited 0
#                                       with no I/O error and no mismatch

. "$top_srcdir/tests/lib/xbd.sh"

DOMU=1

front_need() {
	bk_need blkback/xbd-back blkfront/xbd-front
}

front_setup() {
	bk_setup blkback/xbd-back blkfront/xbd-front
	new_domain "$DOMU" >/dev/null
	DISK="$WORK/disk.img"
	# a pattern, not zeros, so that reads of never-written data are checked too
	head -c 16777216 /dev/urandom >"$DISK" || fail "cannot create $DISK"
	DEVID=$(add_disk "$DOMU" xvdb "$DISK" "$@") || exit 1
	# shellcheck disable=SC2086 # BACK_OPTS is a list of options
	start_back $BACK_OPTS
	wait_state "$DOMU" "$DEVID" 2
}

front_bench_done() {
	wait "$1"
	_fb_rc=$?
	echo "--- $2"
	cat "$WORK/bench.out"
	[ $_fb_rc -eq 0 ] || bk_fail "bench $2 exited $_fb_rc"
	grep -q 'errors: 0$' "$WORK/bench.out" || bk_fail "I/O errors ($2)"
	grep -q 'verify: 0 mismatches' "$WORK/bench.out" || bk_fail "verify mismatches ($2)"
}
