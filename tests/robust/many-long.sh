#!/bin/sh
# make check-robust: many.sh with 64 disks attached and doing I/O at once.
ROBUST_DISKS=${ROBUST_DISKS:-64}
export ROBUST_DISKS
. "$top_srcdir/tests/robust/many.sh"
