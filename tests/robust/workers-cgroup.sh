#!/bin/sh
# Proportional shares between guests (cgroups = auto, workers = 1): each
# guest's worker goes into a cgroup of its own below the service's,
# <own>/dom<DOMID>, with io.weight and cpu.weight from its disks'
# io-weight and cpu-weight; the main process into the leaf <own>/main;
# the io and cpu controllers enabled for them.  This machine's cgroup v2
# may have no controllers (a hybrid host), so XBD_TEST_CGROUP=ROOT:OWN
# (--enable-test-hooks) points xbd-back at a fake cgroup2 mount ROOT whose
# cgroup OWN is the daemon's own: plain files where the kernel has its
# interface files.  Checked: the pids written, the weights from a [disk]
# rule, `xbdctl set` changing them at run time, the worker's directory
# removed once it is reaped, and the start line when the cgroup is not
# delegated or offers neither io nor cpu (cgroups = 1 then fails to start).
. "$top_srcdir/tests/robust/lib.sh"
[ "$(id -u)" = 0 ] || skip "workers change uid and mount namespace: needs root"
strings "$XBD_BACK" | grep -q XBD_TEST_WORKER_MISBEHAVE ||
	skip "xbd-back was built without --enable-test-hooks"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
CG=$WORK/cgroup2
OWN=/system.slice/xbd-back.service
D=$CG$OWN
mkdir -p "$D" || fail "mkdir $D"
echo "cpuset cpu io memory pids" >"$D/cgroup.controllers"
: >"$D/cgroup.subtree_control"
: >"$D/cgroup.procs"
echo "8:0 enable=1 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00" \
	>"$CG/io.cost.qos"
# What systemd 251+ marks a delegated cgroup with (Delegate=yes).
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "trusted.delegate", b"1")' "$D" ||
	skip "cannot set the xattr trusted.delegate on $D"
XBD_TEST_CGROUP="$CG:$OWN"
export XBD_TEST_CGROUP
CTL=$SIMDIR/xbd-back.0.sock
ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}
two_guests
cat >"$WORK/back.conf" <<EOC
[disk $WORK/a.img]
io-weight = 500
cpu-weight = 200
EOC

start_back --config "$WORK/back.conf" --workers 1 --log-level verbose
wait_state "$B" "$db" 2
grep -q "cgroups: each guest's worker in $D/dom<DOMID>" "$LOG" ||
	bk_fail "no start line saying where the workers go"
grep -q "io.cost is on for 8:0" "$LOG" || bk_fail "the start line does not say io.cost is on"
[ "$(cat "$D/main/cgroup.procs")" = "$BACK_PID" ] ||
	bk_fail "main/cgroup.procs has '$(cat "$D/main/cgroup.procs")', not xbd-back's pid $BACK_PID"
grep -qx "+io +cpu" "$D/cgroup.subtree_control" ||
	bk_fail "cgroup.subtree_control has '$(cat "$D/cgroup.subtree_control")'"

# A's worker: placed, the weights of its disk's [disk] rule.
front_paused "$A" "$da" "$WORK/a.out"
wpid=$(pgrep -P "$BACK_PID" -f -- "--worker")
[ -n "$wpid" ] || bk_fail "no worker runs for A"
[ "$(cat "$D/dom$A/cgroup.procs")" = "$wpid" ] ||
	bk_fail "dom$A/cgroup.procs has '$(cat "$D/dom$A/cgroup.procs" 2>&1)', not the worker's pid $wpid"
[ "$(cat "$D/dom$A/io.weight")" = "default 500" ] ||
	bk_fail "dom$A/io.weight has '$(cat "$D/dom$A/io.weight" 2>&1)', not 'default 500'"
[ "$(cat "$D/dom$A/cpu.weight")" = "200" ] ||
	bk_fail "dom$A/cpu.weight has '$(cat "$D/dom$A/cpu.weight" 2>&1)', not 200"
echo "worker $wpid of domain $A in dom$A: io.weight $(cat "$D/dom$A/io.weight"), cpu.weight $(cat "$D/dom$A/cpu.weight")"

# At run time; 0 is the cgroup's default again.
ctl set "vbd/$A/$da" io-weight=300 cpu-weight=0 >"$WORK/set.out" ||
	{ cat "$WORK/set.out"; bk_fail "xbdctl set io-weight failed"; }
grep -q "io-weight=300" "$WORK/set.out" || { cat "$WORK/set.out"; bk_fail "set did not report io-weight=300"; }
[ "$(cat "$D/dom$A/io.weight")" = "default 300" ] ||
	bk_fail "after set: io.weight has '$(cat "$D/dom$A/io.weight")', not 'default 300'"
[ "$(cat "$D/dom$A/cpu.weight")" = "100" ] ||
	bk_fail "after set cpu-weight=0: cpu.weight has '$(cat "$D/dom$A/cpu.weight")', not 100"
ctl list --json | grep -q '"io_weight":300' || bk_fail "xbdctl's settings JSON has no io_weight 300"

# A worker killed: its successor (its rings resume) goes into a new dom$A with the weights.
kill -KILL "$wpid"
sim_wait_for 10 sh -c "p=\$(pgrep -P $BACK_PID -f -- --worker) && [ \"\$p\" != $wpid ] &&
	[ \"\$(cat '$D/dom$A/cgroup.procs' 2>/dev/null)\" = \"\$p\" ]" ||
	bk_fail "the new worker of A is not in dom$A ($(cat "$D/dom$A/cgroup.procs" 2>&1))"
wpid=$(pgrep -P "$BACK_PID" -f -- "--worker")
sim_wait_for 5 sh -c "[ \"\$(cat '$D/dom$A/io.weight' 2>/dev/null)\" = 'default 300' ]" ||
	bk_fail "the new worker's io.weight is '$(cat "$D/dom$A/io.weight" 2>&1)', not 'default 300'"
echo "A's worker killed: its successor $wpid is in dom$A with io.weight $(cat "$D/dom$A/io.weight")"

# Its guest goes: the worker exits, is reaped, its cgroup removed.
touch "$WORK/go"
wait "$FRONT_PID" || { cat "$WORK/a.out"; bk_fail "A's rawfront failed"; }
sim_wait_for 10 sh -c "! kill -0 $wpid 2>/dev/null" || bk_fail "A's worker did not exit"
sim_wait_for 10 sh -c "[ ! -e '$D/dom$A' ]" || bk_fail "dom$A was not removed after its worker exited"
front_ok "$B" "$db" rw
stop_back || bk_fail "xbd-back exited with status $? after SIGTERM"
echo "placed, weighted, set at run time and removed"

# Not delegated (no trusted.delegate): said, not used, served all the same.
python3 -c 'import os, sys; os.removexattr(sys.argv[1], "trusted.delegate")' "$D"
: >"$LOG"
start_back --config "$WORK/back.conf" --workers 1
sim_wait_for 10 grep -q "cgroups: weights not applied: $D is not delegated to xbd-back" "$LOG" ||
	bk_fail "no line saying the cgroup is not delegated"
grep -q "Delegate=yes" "$LOG" || bk_fail "the line does not say Delegate=yes"
front_ok "$A" "$da" rw
stop_back || bk_fail "xbd-back exited with status $? after SIGTERM"
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "trusted.delegate", b"1")' "$D"

# Neither io nor cpu offered (a hybrid host's cgroup2): said, served all the same.
echo "memory pids" >"$D/cgroup.controllers"
: >"$LOG"
start_back --config "$WORK/back.conf" --workers 1
sim_wait_for 10 grep -q "cgroups: weights not applied: $D offers neither the io nor the cpu controller" "$LOG" ||
	bk_fail "no line saying the controllers are missing"
front_ok "$A" "$da" rw
[ ! -e "$D/dom$A" ] || bk_fail "a worker was placed in a cgroup without controllers"
stop_back || bk_fail "xbd-back exited with status $? after SIGTERM"

# workers = 0: the weights are accepted and said not to apply.
: >"$LOG"
run_back --config "$WORK/back.conf" --workers 0 --run true || bk_fail "workers = 0 did not start"
grep -q "cgroups: weights not applied: workers = 0" "$LOG" || bk_fail "workers = 0: no line saying weights are not applied"

# cgroups = 1: required, so the start fails with that line.
: >"$LOG"
run_back --config "$WORK/back.conf" --workers 1 --cgroups 1 --run true && bk_fail "cgroups = 1 started without usable cgroups"
[ "$(grep -c "cgroups" "$LOG")" = 1 ] || bk_fail "cgroups = 1: not one line"
grep -q "cgroups = 1" "$LOG" || bk_fail "cgroups = 1: the line does not say why it stops"
echo "unusable cgroups said in one line; cgroups = 1 refuses to start"
exit 0
