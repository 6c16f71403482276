#!/bin/sh
# tests/e2e/matrix-queues.sh: the end-to-end fio matrix, queue, ring and ABI rows
# (tests/e2e/matrix.sh; E2E_LONG=1 for the long version).
exec /bin/sh "$top_srcdir/tests/e2e/matrix.sh" multiqueue ring-order0 ring-order4 abi32 abi64
