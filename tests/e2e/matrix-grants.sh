#!/bin/sh
# tests/e2e/matrix-grants.sh: the end-to-end fio matrix, grant and cache mode rows
# (tests/e2e/matrix.sh; E2E_LONG=1 for the long version).
exec /bin/sh "$top_srcdir/tests/e2e/matrix.sh" persistent-on persistent-off grant-map grant-copy cache-writeback cache-writethrough cache-unsafe
