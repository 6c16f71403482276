# tests/blkfront/testback-lib.sh: a simulated host with domain 1 and a vbd
# whose backend is tests/blkfront/testback (not xbd-back), so these tests
# run whatever state xbd-back is in and can misbehave on purpose.
#   tb_setup               host, domain 1, xvdb; sets WORK, DEVID, BE
#   tb_start [options...]  start testback on xvdb (as dom0)

. "$top_srcdir/tests/lib/sim.sh"

XBD_FRONT="$top_builddir/blkfront/xbd-front"
TESTBACK="$top_builddir/tests/blkfront/testback"
DOMU=1

as_domu() {
	( sim_env "$DOMU"; exec "$@" )
}

tb_setup() {
	sim_need sim/xbd-sim xenstore/xbd-xenstored blkfront/xbd-front tests/blkfront/testback
	sim_start
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-front-test.XXXXXXXX") || fail "mktemp failed"
	sim_on_exit "rm -rf '$WORK'"
	( sim_env 0; "$XBD_SIM" domain create "$SIMDIR" "$DOMU" >/dev/null ) ||
		fail "xbd-sim domain create failed"
	: >"$WORK/none.img"
	DEVID=$( sim_env 0; "$XBD_SIM" disk add "$SIMDIR" "$DOMU" xvdb "$WORK/none.img" ) ||
		fail "xbd-sim disk add failed"
	BE=/local/domain/0/backend/vbd/$DOMU/$DEVID
}

tb_start() {
	( sim_env 0; exec "$TESTBACK" "$BE" "$@" ) >>"$WORK/testback.log" 2>&1 &
	TB_PID=$!
	sim_on_exit "kill -9 $TB_PID; wait $TB_PID"
}
