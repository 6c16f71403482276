#!/bin/sh
# tests/e2e/matrix-uring.sh: the end-to-end fio matrix on the uring engine
# (engine = uring): the file rows aio passes (4k random, 1 MiB sequential,
# flush, FUA in flush and barrier mode, trim, read-only, grant copy,
# writethrough, a restart under I/O), each also checking that the disk was
# served by uring (tests/e2e/matrix.sh; E2E_LONG=1 for the long version).
: "${top_srcdir:?top_srcdir must be set (run through make check)}"
: "${top_builddir:?top_builddir must be set (run through make check)}"
if ! "$top_builddir/blkback/xbd-back" --check-config --control none --disk "x:engine=uring" \
	>/dev/null 2>&1; then
	echo "SKIP: xbd-back was built without liburing (no uring engine)" >&2
	exit 77
fi
exec /bin/sh "$top_srcdir/tests/e2e/matrix.sh" \
	$(/bin/sh "$top_srcdir/tests/e2e/matrix.sh" --list | tr ' ' '\n' | grep '^uring-')
