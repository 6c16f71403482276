#!/bin/sh
# xbd-back killed with SIGKILL while a guest runs fio, then restarted.
# Nothing in xenstore changes on SIGKILL (state stays Connected, the ring
# references and event channel stay).  The dead daemon may have written
# responses into ring slots without pushing them (responses share slots
# with requests), so the slots between rsp_prod and req_prod cannot be
# trusted as requests: a restarted xbd-back that finds a device Connected
# without the clean-stop marker (written only when SIGTERM answered
# everything) closes it instead of resuming, and the frontend reconnects
# with fresh rings and resubmits.  Asserted:
#  - a ring idle at the kill is not resumed: the restarted daemon says
#    why and writes Closing;
#  - fio (randwrite, verify=crc32c, iodepth 16, through nbdkit) running
#    across a SIGKILL and restart finishes with its verify passed and 0
#    errors (libxbdfront reconnects and resubmits when the backend closes);
#    the stall and the fio figures are printed;
#  - the restarted daemon leaves no sanitizer report.
. "$top_srcdir/tests/robust/lib.sh"
need_fio_nbd

G=$(new_domain)
head -c 16777216 /dev/urandom >"$WORK/a.img"
truncate -s 16M "$WORK/b.img"
add_disk "$G" xvdb "$WORK/a.img" >/dev/null
b=$(add_disk "$G" xvdc "$WORK/b.img")

# ---- an idle ring across SIGKILL ----
start_back
RAWFRONT_GO=$WORK/go
export RAWFRONT_GO
"$ASDOM" "$G" "$RAWFRONT" --dev "$b" pause >"$WORK/pause.out" 2>&1 &
fpid=$!
sim_on_exit "kill $fpid"
sim_wait_for 10 grep -q paused "$WORK/pause.out" || { cat "$WORK/pause.out"; bk_fail "rawfront did not start"; }
kill -KILL "$BACK_PID"
wait "$BACK_PID" 2>/dev/null
[ "$(bstate "$G" "$b")" = 4 ] || bk_fail "state after SIGKILL is $(bstate "$G" "$b"), not 4"
start_back
closed() { [ "$(bstate "$G" "$b")" = 5 ]; }
sim_wait_for 10 closed ||
	bk_fail "restarted xbd-back did not close the ring left by a SIGKILLed daemon (state $(bstate "$G" "$b"))"
grep -q "vbd $G/$b: found Connected after an unclean stop" "$LOG" ||
	bk_fail "the restarted xbd-back did not say why it closed the ring"
grep -q "vbd $G/$b: .*resuming" "$LOG" && bk_fail "the restarted xbd-back resumed an untrusted ring"
kill "$fpid" 2>/dev/null
wait "$fpid" 2>/dev/null
echo "ok: a ring left by a SIGKILLed daemon is closed, not resumed"

# ---- fio across SIGKILL ----
# Writes throttled to 500/s: fio is certainly mid-run when the daemon dies.
fio_job "$WORK/crash.fio" 8m "iodepth=16" "rate_iops=4000,500"
(fio_nbd "$G" xvdb "$WORK/crash.json" "$WORK/crash.fio" >"$WORK/crash.out" 2>&1; echo $? >"$WORK/crash.rc") &
sim_on_exit "kill $!"
sim_wait_for 20 sh -c "[ \$(grep -c 'vbd $G/51728: connected' '$LOG') -ge 1 ]" || bk_fail "fio's frontend did not connect"
sleep 1
[ -e "$WORK/crash.rc" ] && bk_fail "fio finished before the kill: the test proves nothing"
kill -KILL "$BACK_PID"
wait "$BACK_PID" 2>/dev/null
t0=$(date +%s%N)
sleep 1
start_back
sim_wait_for 60 test -e "$WORK/crash.rc" || bk_fail "fio did not finish within 60 s of the restart"
t1=$(date +%s%N)
rc=$(cat "$WORK/crash.rc")
[ "$rc" = 0 ] || { cat "$WORK/crash.out" "$WORK/crash.json"; bk_fail "fio across SIGKILL failed (status $rc)"; }
fio_ok "$WORK/crash.json" || { cat "$WORK/crash.json"; bk_fail "fio across SIGKILL reports errors"; }
python3 - "$WORK/crash.json" <<'PY'
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
w = j["write"]
print("fio across SIGKILL + 1 s + restart: verify=crc32c passed, error %d, %d writes, "
      "max write completion latency %.2f s" % (j["error"], w["total_ios"], w["clat_ns"]["max"] / 1e9))
PY
echo "restart to fio finished: $(( (t1 - t0) / 1000000 )) ms"
echo "what the restarted xbd-back did with fio's device:"
grep "vbd $G/51728" "$LOG" | tail -n 4
back_alive
bk_done
