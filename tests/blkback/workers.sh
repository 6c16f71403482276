#!/bin/sh
# xbd-back's workers (worker.h): by default (workers = 1) each
# frontend domain's disks are served by a process of its own, started when
# its first device connects.  Asserted, from /proc as a user would check:
#  - guests A and B have one worker each, children of xbd-back, not
#    xbd-back itself, and not the same process;
#  - each runs as uid = gid = worker-uid-base + its domid, with no
#    supplementary groups, no capabilities (CapEff 0), no_new_privs,
#    seccomp in filter mode (2) and a mount namespace of its own whose
#    root is empty (it sees none of the host's files);
#  - xbdctl's JSON names the worker (pid, uid), and I/O through it works;
#  - the steps the simulator does not allow are named in one log line;
#  - with workers = 0 the same disks are served by xbd-back itself: no
#    child process, "worker": null.
. "$top_srcdir/tests/blkback/common.sh"
BASE=1879048192
CTL=$SIMDIR/xbd-back.0.sock
ctl() { "$XBDCTL" --socket "$CTL" "$@"; }
[ "$(id -u)" = 0 ] || skip "workers change uid and mount namespace: needs root"

A=$(new_domain)
B=$(new_domain)
truncate -s 16M "$WORK/a.img"
da=$(add_disk "$A" xvdb "$WORK/a.img")
truncate -s 16M "$WORK/b.img"
db=$(add_disk "$B" xvdb "$WORK/b.img")
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO

# connect_both: a guest on each disk, connected and waiting for WORK/go.
connect_both() {
	rm -f "$WORK/go"
	"$ASDOM" "$A" "$RAWFRONT" --dev "$da" pause >"$WORK/pa.out" 2>&1 &
	pa=$!
	"$ASDOM" "$B" "$RAWFRONT" --dev "$db" pause >"$WORK/pb.out" 2>&1 &
	pb=$!
	sim_on_exit "kill $pa $pb 2>/dev/null"
	sim_wait_for 10 grep -q paused "$WORK/pa.out" || { cat "$WORK/pa.out"; bk_fail "guest A did not connect"; }
	sim_wait_for 10 grep -q paused "$WORK/pb.out" || { cat "$WORK/pb.out"; bk_fail "guest B did not connect"; }
}
finish_both() {
	touch "$WORK/go"
	wait "$pa" || { cat "$WORK/pa.out"; bk_fail "guest A's I/O failed"; }
	wait "$pb" || { cat "$WORK/pb.out"; bk_fail "guest B's I/O failed"; }
}
status_is() { # PID FIELD VALUE: /proc/PID/status's FIELD (tabs as blanks)
	_v=$(sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" | tr -s '\t ' ' ' | sed 's/ $//')
	[ "$_v" = "$3" ] || bk_fail "worker $1: $2 is '$_v', not '$3'"
}

start_back
connect_both
for d in "$A/$da" "$B/$db"; do
	dom=${d%/*}
	ctl stats --json "vbd/$d" >"$WORK/json" || bk_fail "xbdctl stats --json vbd/$d failed"
	pid=$(jq -r '.devices[0].worker.pid // empty' "$WORK/json")
	[ -n "$pid" ] && [ "$pid" != 0 ] || { cat "$WORK/json"; bk_fail "vbd/$d: no worker in xbdctl's JSON"; }
	uid=$((BASE + dom))
	jq -e ".devices[0].worker.uid == $uid" "$WORK/json" >/dev/null || bk_fail "vbd/$d: the JSON's uid is not $uid"
	[ "$pid" != "$BACK_PID" ] || bk_fail "vbd/$d is served by xbd-back itself"
	[ "$(ps -o ppid= -p "$pid" | tr -d ' ')" = "$BACK_PID" ] || bk_fail "worker $pid is not xbd-back's child"
	status_is "$pid" Uid "$uid $uid $uid $uid"
	status_is "$pid" Gid "$uid $uid $uid $uid"
	status_is "$pid" Groups ""
	status_is "$pid" CapEff 0000000000000000
	status_is "$pid" CapPrm 0000000000000000
	status_is "$pid" CapBnd 0000000000000000
	status_is "$pid" NoNewPrivs 1
	status_is "$pid" Seccomp 2
	[ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink "/proc/$BACK_PID/ns/mnt")" ] ||
		bk_fail "worker $pid shares xbd-back's mount namespace"
	# Its root holds nothing of the host's: no /etc, no /usr, no /proc.
	for f in etc usr proc bin; do
		[ ! -e "/proc/$pid/root/$f" ] || bk_fail "worker $pid sees /$f"
	done
	eval "w$dom=$pid"
	echo "ok: vbd $d: worker $pid, uid $uid, CapEff 0, NoNewPrivs 1, Seccomp 2, its own empty root"
done
eval "wa=\$w$A wb=\$w$B"
[ "$wa" != "$wb" ] || bk_fail "guests A and B share worker $wa"
finish_both
[ "$(grep -c "workers: confinement steps not possible here" "$LOG")" = 1 ] ||
	bk_fail "the skipped confinement steps are not named in exactly one line"
grep -q "workers: confinement steps not possible here: .*simulator's directories" "$LOG" ||
	bk_fail "the skipped-steps line does not name the simulator's directories"
echo "ok: I/O through both workers; the steps the simulator does not allow named once"
stop_back || bk_fail "xbd-back exited with status $? after SIGTERM"
for p in "$wa" "$wb"; do
	! kill -0 "$p" 2>/dev/null || bk_fail "worker $p outlived xbd-back"
done

# ---- workers = 0: everything in xbd-back itself ----
start_back --workers 0
connect_both
ctl stats --json "vbd/$A/$da" >"$WORK/json" || bk_fail "xbdctl stats --json failed"
jq -e '.devices[0].worker == null' "$WORK/json" >/dev/null || bk_fail "workers = 0: the JSON names a worker"
[ -z "$(ps -o pid= --ppid "$BACK_PID")" ] || bk_fail "workers = 0: xbd-back has child processes"
finish_both
echo "ok: workers = 0 serves both disks in xbd-back itself"
bk_done
