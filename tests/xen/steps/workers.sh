# step workers: xbd-back --workers 1 takes the live rings over: workers confined, xbd3's killed and replaced
# needs: xbd-back guest:xbd3
# lines: workers-

# ---- confinement: each guest domain's disks in a worker of its own ---------
# (xbd-back restarted with --workers 1, the default, taking the live
# rings over, whatever XBD_ARGS says): its uid, no
# capabilities, no new privileges, seccomp filter mode, its own mount
# namespace; the worker of xbd3 killed under its write+verify rounds comes
# back and they verify
d3=$(xl domid xbd3)
kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null
echo "---- restarted with --workers 1" >>$L/xbd-back.log
xbd_start --workers 1
# The rings are served again once each device's worker has started and
# taken its ring over: on a loaded host that is not done in a fixed time
# (a deb13 boot at host load 7 found both devices still InitWait with no
# worker 3 s after the start, and both Connected in their workers a few
# seconds later), so wait for every device to be Connected in a worker,
# up to 120 s, and say how long it took
wk_t0=$(up)
for i in $(seq 240); do
	xbdctl stats --json >$L/xbdctl-workers.json 2>&1 &&
		! grep -q '"connected":false\|"worker":{"pid":null' $L/xbdctl-workers.json && break
	sleep 0.5
done
say "workers: every device Connected in its worker after $(since $wk_t0)s"
wpids=$(grep -o '"worker":{"pid":[0-9]*' $L/xbdctl-workers.json | sed 's/.*://' | sort -u)
bad= note=
[ -n "$wpids" ] || bad="no worker in xbdctl stats --json"
for p in $wpids; do
	st=/proc/$p/status
	uid=$(awk '/^Uid:/ { print $2 }' $st); cap=$(awk '/^CapEff:/ { print $2 }' $st)
	nnp=$(awk '/^NoNewPrivs:/ { print $2 }' $st); sc=$(awk '/^Seccomp:/ { print $2 }' $st)
	mns=no; [ "$(readlink /proc/$p/ns/mnt)" != "$(readlink /proc/$XBD_PID/ns/mnt)" ] && mns=yes
	note="$note pid $p: uid=$uid CapEff=$cap NoNewPrivs=$nnp Seccomp=$sc own-mnt-ns=$mns;"
	[ "$uid" -ge 1879048192 ] 2>/dev/null && [ "$cap" = 0000000000000000 ] && [ "$nnp" = 1 ] && [ "$sc" = 2 ] &&
		[ $mns = yes ] || bad="${bad:+$bad, }pid $p not confined"
done
skipped=$(grep -a 'confinement steps not possible here' $L/xbd-back.log | tail -1 | sed 's/.*here: //')
if [ -z "$bad" ]; then step workers-confined PASS "$(echo $wpids | wc -w) workers:$note skipped steps: ${skipped:-none}"
else step workers-confined FAIL "$bad:$note skipped: ${skipped:-none}"; fi
# the device's own record: from its "id" to the next device's
w3=$(sed 's/{"id":/\n&/g' $L/xbdctl-workers.json | grep -F '"id":"'$XBD_SLOT/$d3'/51728"' |
	grep -o '"worker":{"pid":[0-9]*' | head -1 | sed 's/.*"pid"://')
r0=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0')
# (never kill 0: this script's whole process group)
if [ "${w3:-0}" -gt 1 ]; then
	kill -KILL $w3
	r1=$r0
	for i in $(seq 240); do
		r1=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0'); [ $r1 -ge $((r0 + 2)) ] && break
		glog xbd3 | grep -q '^DOMU-ROUND .*rc=[1-9]' && break
		sleep 0.5
	done
	bad=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=[1-9]')
	res=$(grep -a "$XBD_SLOT/$d3/51728: resumed after its worker died" $L/xbd-back.log | tail -1 | sed 's/^xbd-back: //')
	note="xbd3's worker (pid $w3) killed under its rounds: $((r1 - r0)) more verified, $bad failed; ${res:-no resume line}; xbd-back alive: $(xbd_alive && echo yes || echo no)"
	[ $r1 -ge $((r0 + 2)) ] && [ $bad = 0 ] && [ -n "$res" ] && xbd_alive &&
		step workers-kill PASS "$note" || step workers-kill FAIL "$note"
else
	step workers-kill FAIL "no worker pid for $XBD_SLOT/$d3/51728 in xbdctl stats --json"
fi
# a call outside a worker's list: its own line in xbd-back's log, and the supervisor's
sc=$(dmesg | grep -a -c 'type=1326')
sl=$(grep -a -c 'is not allowed; called from\|killed by seccomp' $L/xbd-back.log)
[ "$sc" = 0 ] && [ "$sl" = 0 ] &&
	step workers-seccomp-clean PASS "no seccomp report in xbd-back's log, no audit type=1326 line in dom0's kernel log" ||
	step workers-seccomp-clean FAIL "$sl seccomp lines in xbd-back's log: $(grep -a 'is not allowed; called from\|killed by seccomp' $L/xbd-back.log | head -2 | tr '\n' '|') $sc audit type=1326 lines: $(dmesg | grep -a 'type=1326' | tail -2 | tr '\n' '|')"
xbd_crashed "the workers step"
kill -TERM $XBD_PID; wait $XBD_PID 2>/dev/null
xbd_start || step xbd-restart FAIL "xbd-back did not come back"
