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
