#!/bin/sh
# xbd-back --run: exits with the command's status after tearing down, exits
# 0 on SIGTERM (stopping the command), and says so when there is no
# platform to serve.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 1M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
run_back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a connect && exit 3"
rc=$?
[ $rc = 3 ] || bk_fail "--run 'exit 3' made xbd-back exit $rc"
grep -q "vbd/$dom/$a: connected" "$LOG" || bk_fail "device not served during --run"
run_back --run 'kill -TERM $PPID; sleep 10'
rc=$?
[ $rc = 0 ] || bk_fail "SIGTERM during --run: exit $rc, not 0"
(
	unset XBD_SIM_DIR XENSTORED_PATH
	"$XBD_BACK" --platform sim --run true 2>"$WORK/err"
) && fail "xbd-back ran without a simulated host"
grep -q "cannot open the platform" "$WORK/err" || { cat "$WORK/err"; fail "no clear error without a platform"; }
bk_done
