#!/bin/sh
# make check-long (and check-robust): crash.sh with 100 SIGKILLs under fio.
CRASH_KILLS=${CRASH_KILLS:-100}
export CRASH_KILLS
. "$top_srcdir/tests/robust/crash.sh"
