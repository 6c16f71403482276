#!/bin/bash
# tests/xen/lifecycle-check.sh: the lifecycle step's judgement of what it
# saw (tests/xen/lib/lifecycle.sh), on the host, with xl and the clock played
# by this script.  Two cases from a deb13 CI boot (Dec 4) that the step
# judged wrong:
#  - the guest's console log held its first boot twice (Xen had restarted
#    it after a triple fault), and xl reboot was taken as done before the
#    guest had come back;
#  - a step that began with no guest blamed a triple fault logged long
#    before it (another boot's), and destroyed the guest to try again;
# and one from a later CI boot: the guest's first boot died of a double
# fault (EFLAGS with bits no 64-bit guest has) and nothing tried again.
. "$top_srcdir/tests/lib/sim.sh"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-lcc.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
L=$WORK XENVER=4.20 LCTYPE=pvh GTYPE=pv D0TYPE=pv STEPS=" lifecycle "
. "$top_srcdir/tests/xen/lib/lifecycle.sh"
LC_LOG=$WORK/lc-stamped.log

# what dom0-init.sh and the system would give, played here
say() { :; }
since() { echo 1.0; }
sleep() { :; }
NOW=430.52
up() { echo $NOW; }
step() { echo "$1 $2 ${*:3}" >>$WORK/steps.txt; }
DOMID=8 TF_LINES= REBOOT_BOOTS=0
xl() {
	case $1 in
	domid) [ -n "$DOMID" ] && echo $DOMID ;;
	dmesg) for d in $TF_LINES; do echo "(XEN) d${d}v0 Triple fault - invoking HVM shutdown action 1"; done ;;
	reboot)	# the guest's new boot, as its console lines reach dom0
		if [ $REBOOT_BOOTS = 1 ]; then
			DOMID=9
			printf '%s\n' "441.10 DOMU-INIT uptime=28.10 vcpus=1 mode=lifecycle blkfront-params=[]" \
				"442.20 DOMU-ROOTFS-MOUNTED /dev/xvda ext4" "443.00 DOMU-LC-ROUND-BEGIN n=1" \
				"458.40 DOMU-LC-ROUND-END n=1 rc=0 wlat_max_ms=300 rlat_max_ms=70" >>$LC_LOG
		else
			DOMID=
		fi ;;
	*) return 0 ;;
	esac
}
result() { tail -1 $WORK/steps.txt 2>/dev/null; }

# The first boot's lines twice (a boot Xen restarted), then rounds up to 8,
# the eighth in flight since 428.0
{
	for t in 249 294; do
		echo "$t.66 DOMU-INIT uptime=29.15 vcpus=1 mode=lifecycle blkfront-params=[]"
		echo "$((t + 1)).77 DOMU-ROOTFS-MOUNTED /dev/xvda ext4"
		echo "$((t + 16)).03 DOMU-LC-ROUND-END n=1 rc=0 wlat_max_ms=315 rlat_max_ms=71"
	done
	echo "428.00 DOMU-LC-ROUND-BEGIN n=8"
	echo "429.00 DOMU-HB 163.09"
} >$LC_LOG
cp $LC_LOG $WORK/log0

# 1. xl reboot, and the guest never comes back: a failure, whatever the
#    log held before
REBOOT_BOOTS=0
lc_reboot
case $(result) in
"lc-reboot FAIL"*"did not come back"*) echo "ok: a reboot with no new boot fails" ;;
*) fail "a reboot whose guest never came back was judged: $(result)" ;;
esac

# 2. xl reboot, and the new boot's lines come: a pass, timed from the reboot
cp $WORK/log0 $LC_LOG; DOMID=8 REBOOT_BOOTS=1
lc_reboot
case $(result) in
"lc-reboot PASS"*"back as domid 9 (was 8)"*"init 11 s, root mounted 12 s, first round done 28 s after xl reboot"*)
	echo "ok: the new boot is found and timed" ;;
*) fail "a reboot whose guest came back was judged: $(result)" ;;
esac

# 3. triple faults: only one logged during the step, for the guest's domid
#    or a later one, is the step's
TF_LINES="4 5"
LC_D0= LC_TF_SEEN=$(lc_tf_domids)
! lc_emulator_kill || fail "a step that began with no guest blamed the triple faults of domids 4 and 5, logged before it"
LC_D0=8 LC_TF_SEEN=$(lc_tf_domids)
! lc_emulator_kill || fail "no triple fault during the step, yet one was found (seen before it: $LC_TF_SEEN)"
TF_LINES="4 5 9"
lc_emulator_kill || fail "the triple fault of domid 9 (the guest restarted from 8) during the step was not found"
[ "$(lc_tf_new "4 5" 8)" = "9 " ] || fail "lc_tf_new '4 5' 8 printed '$(lc_tf_new "4 5" 8)', not '9 '"
LC_D0=10
! lc_emulator_kill || fail "the triple fault of domid 9, below the step's guest's domid 10, was blamed"
echo "ok: triple faults are the step's only when logged during it for its guest"

# 4. a double fault on the guest's console during the step is the
#    emulator's too (CI's boot of Dec 4, the guest's first boot); any other
#    panic, or one before the step, is not
TF_LINES="4 5" LC_D0=8 LC_TF_SEEN="4 5" LC_T0=470
cp $WORK/log0 $LC_LOG
echo "465.00 [   40.1] traps: PANIC: double fault, error_code: 0x0" >>$LC_LOG
! lc_emulator_kill || fail "a double fault logged before the step began was blamed"
echo "475.75 [   44.624534] traps: PANIC: double fault, error_code: 0x0" >>$LC_LOG
echo "475.81 [   44.628330] RIP: 0010:__es_remove_extent+0x206/0x7c0 [ext4]" >>$LC_LOG
lc_emulator_kill || fail "the guest's double fault during the step was not found"
case $LC_WHY in *"double fault"*"__es_remove_extent"*) ;; *) fail "LC_WHY: '$LC_WHY'" ;; esac
cp $WORK/log0 $LC_LOG
echo "475.75 [   44.6] kernel BUG at fs/ext4/extents.c:123!" >>$LC_LOG
echo "475.80 [   44.7] Kernel panic - not syncing: Fatal exception" >>$LC_LOG
! lc_emulator_kill || fail "a guest's BUG in ext4 was taken for the emulator's: $LC_WHY"
echo "ok: a double fault during the step is the emulator's, another panic is a failure"

# 5. the guest killed between two steps (CI's deb13 boot of Dec 4, 18:50:
#    a triple fault after lc-pause, then xl save failed on the dying
#    domain): the next step runs on a guest created again, and says so
cp $WORK/log0 $LC_LOG
lc_recreate() { DOMID=12; echo recreated >>$WORK/recreated; }
lc_fake() { lc_step fake PASS - "ran on domid $(xl domid lc)"; }
DOMID=5 TF_LINES="4" LC_EMU=0
lc_mark
TF_LINES="4 5"; DOMID=6   # Xen restarted it after the step
lc_run fake
[ -s $WORK/recreated ] || fail "a guest killed between two steps was not created again"
case $(result) in
"lc-fake PASS"*"ran on domid 12"*"emulation failures so far"*": 1") echo "ok: a guest killed between steps is created again before the next" ;;
*) fail "after a kill between steps: $(result)" ;;
esac
rm -f $WORK/recreated
lc_run fake
[ ! -e $WORK/recreated ] || fail "a guest not killed since the last step was created again"

# 6. the time budget (CI's deb13 boot of Dec 5: two guests lost, 27
#    minutes): once used up, a sub-step does not begin and says SKIP
lc_mark
LC_START=0 LC_BUDGET=400   # NOW is 430.52
ran=0; lc_fake() { ran=1; lc_step fake PASS - "ran"; }
lc_run fake
[ $ran = 0 ] || fail "a sub-step began after the lifecycle's time budget was used up"
case $(result) in
"lc-fake SKIP"*"LC_BUDGET=400 s"*"430 s so far"*"emulation failures so far"*": 1") echo "ok: no sub-step begins once the budget is used up" ;;
*) fail "after the budget was used up: $(result)" ;;
esac
LC_BUDGET=0
lc_run fake
case $(result) in "lc-fake PASS"*) ;; *) fail "LC_BUDGET=0 (no budget) did not run the step: $(result)" ;; esac

# 7. ... nor is a guest the emulator killed during a sub-step created
#    again for its retry once the budget is used up
LC_BUDGET=1000 DOMID=12 TF_LINES="4 5"
lc_mark
lc_kill() { TF_LINES="4 5 12"; NOW=1200.00; lc_step kill FAIL - "round 3 rc=none"; }
lc_run kill
[ ! -e $WORK/recreated ] || fail "a guest was created again after the budget was used up"
case $(result) in
"lc-kill SKIP"*"triple fault"*"no time is left to try again"*"1200 s so far"*"failures so far"*": 2") echo "ok: no retry once the budget is used up" ;;
*) fail "a step whose guest the emulator killed after the budget: $(result)" ;;
esac
exit 0
