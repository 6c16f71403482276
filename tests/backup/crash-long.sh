#!/bin/sh
# crash.sh's rounds 20 times (make check-backup-long, make check-long):
# kill -9 of xbd-back or of its worker at a random instant of a guest's
# writes between two checkpoints, the incremental's restore equal to the
# disk each time, the over-reported blocks printed.
CBT_CRASH_ROUNDS=${CBT_CRASH_ROUNDS:-20}
export CBT_CRASH_ROUNDS
. "$top_srcdir/tests/backup/crash.sh"
