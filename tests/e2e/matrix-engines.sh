#!/bin/sh
# tests/e2e/matrix-engines.sh: the end-to-end fio matrix, rows on the NBD
# engine (qcow2 through qemu-storage-daemon, nbdkit: flush, FUA, trim,
# read-only, the server stopped and started under I/O) and the RBD engine
# (a throwaway memstore Ceph cluster: flush, FUA, trim, resize, snapshot)
# (tests/e2e/matrix.sh).  make check runs the rows that only this matrix
# covers (tests/blkback/engine-nbd.sh and engine-rbd.sh test the rest with
# rawfront); E2E_LONG=1 (make check-long) runs every row.
if [ "${E2E_LONG:-0}" = 1 ]; then
	exec /bin/sh "$top_srcdir/tests/e2e/matrix.sh" nbd-verify nbd-flush nbd-fua nbd-trim \
		nbd-readonly nbd-outage rbd-verify rbd-flush rbd-fua rbd-trim rbd-resize rbd-snapshot
fi
exec /bin/sh "$top_srcdir/tests/e2e/matrix.sh" nbd-verify nbd-fua nbd-outage rbd-fua rbd-resize \
	rbd-snapshot
