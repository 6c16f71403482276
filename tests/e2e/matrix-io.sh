#!/bin/sh
# tests/e2e/matrix-io.sh: the end-to-end fio matrix, data path (4k random, 1 MiB sequential, flush, FUA, trim, read-only) rows
# (tests/e2e/matrix.sh; E2E_LONG=1 for the long version).
exec /bin/sh "$top_srcdir/tests/e2e/matrix.sh" rand4k seq1m flush fua fua-barrier trim readonly
