#!/bin/sh
# make check-robust: churn.sh with 200 attach/detach and 200 create/destroy cycles.
ROBUST_CYCLES=${ROBUST_CYCLES:-200}
export ROBUST_CYCLES
. "$top_srcdir/tests/robust/churn.sh"
