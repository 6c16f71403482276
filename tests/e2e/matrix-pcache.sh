#!/bin/sh
# tests/e2e/matrix-pcache.sh: the end-to-end fio matrix through dom0's page
# cache (direct = 0): 4k random I/O, flush, FUA, trim, writethrough and a
# restart under I/O, each also checking that the backend serves the disk
# through the page cache (tests/e2e/matrix.sh; E2E_LONG=1 for the long
# version).
: "${top_srcdir:?top_srcdir must be set (run through make check)}"
exec /bin/sh "$top_srcdir/tests/e2e/matrix.sh" \
	$(/bin/sh "$top_srcdir/tests/e2e/matrix.sh" --list | tr ' ' '\n' | grep '^pcache-')
