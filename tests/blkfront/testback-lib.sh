# tests/blkfront/testback-lib.sh: a simulated host with domain DOMU (1)
# and a vbd whose backend is tests/blkfront/testback (not xbd-back), so
# these tests run whatever state xbd-back is in and can misbehave on
# purpose.  Built on tests/lib/xbd.sh (WORK, ASDOM, xs ...; see
# tests/README.md).
#   tb_setup               host, domain 1, xvdb; sets WORK, DOMU, DEVID, BE
#   tb_start [options...]  start testback on xvdb (as dom0); TB_PID

. "$top_srcdir/tests/lib/xbd.sh"

TESTBACK="$top_builddir/tests/blkfront/testback"
DOMU=1

tb_setup() {
	bk_setup blkfront/xbd-front tests/blkfront/testback
	new_domain "$DOMU" >/dev/null
	: >"$WORK/none.img"
	DEVID=$(add_disk "$DOMU" xvdb "$WORK/none.img") || exit 1
	BE=/local/domain/0/backend/vbd/$DOMU/$DEVID
}

tb_start() {
	( sim_env 0; exec "$TESTBACK" "$BE" "$@" ) >>"$WORK/testback.log" 2>&1 &
	TB_PID=$!
	sim_on_exit "kill -9 $TB_PID; wait $TB_PID"
}
