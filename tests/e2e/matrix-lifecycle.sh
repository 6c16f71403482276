#!/bin/sh
# tests/e2e/matrix-lifecycle.sh: the end-to-end fio matrix, detach/re-attach and xbd-back restart rows
# (tests/e2e/matrix.sh; E2E_LONG=1 for the long version).
exec /bin/sh "$top_srcdir/tests/e2e/matrix.sh" reattach restart restart-io
