# tests/blkback/common.sh: the set-up of xbd-back's tests.  Sourced by each
# test: skips while xbd-back, rawfront or the simulator are missing, then
# starts a simulated host with WORK, LOG and ASDOM ready.  Every helper
# (start_back, run_back, front, add_disk, wait_state, bk_fail, bk_done ...)
# is tests/lib/xbd.sh's; see tests/README.md.

. "$top_srcdir/tests/lib/xbd.sh"
bk_setup blkback/xbd-back tests/blkback/rawfront
