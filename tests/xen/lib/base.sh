# tests/xen/lib/base.sh: sourced by dom0-init.sh (dom0's PID 1 in make
# check-xen).  The words every part of the harness speaks: the kernel's
# command line (arg), the clock (up, since), the console (say), a step's
# line (step), whether a step was asked for (want), and the end of the
# boot (finish).  Definitions only: sourcing it runs nothing.
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tail -1; }
up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "XBDT[$(up)]: $*"; }
since() { awk -v a="$1" -v b="$(up)" 'BEGIN{printf "%.1f", b-a}'; }
FAILS=0
# Each step's line says which guest type it covered and on which dom0:
# "pvh/pv" (STEP_G: the guest type when it is not the boot's, "-" for a
# step of dom0's alone)
step() {  # NAME PASS|FAIL|SKIP NOTE...
	echo "XBDT-STEP $1 $2 ${STEP_G:-$GTYPE}/$D0TYPE ${*:3}"
	echo "$1 $2 ${STEP_G:-$GTYPE}/$D0TYPE ${*:3}" >>$L/steps.txt
	# the logs so far on the payload disk, should the boot hang later
	sync -f $L/steps.txt 2>/dev/null &
	[ "$2" = FAIL ] && FAILS=$((FAILS + 1))
	return 0
}
# finish: the logs back to the payload disk, the verdict, power off.
finish() {
	[ -z "$STEPS_CHECKED" ] || steps_said
	dmesg >$L/dmesg.txt 2>&1
	say "steps failed: $FAILS"
	echo "XBDT-DONE fails=$FAILS"
	sync
	mount -o remount,ro /opt/xbd 2>/dev/null
	sync; sleep 1
	echo o >/proc/sysrq-trigger   # ACPI S5: QEMU exits
	sleep 30
	exit 0
}
want() { case "$STEPS" in *" $1 "*) return 0 ;; esac; return 1; }
