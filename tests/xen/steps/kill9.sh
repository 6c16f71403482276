# step kill9: kill -9 of xbd-back under I/O; the guests see a pause, not a lost disk
# needs: xbd-back guest:xbd3
# lines: xbd-kill9

# ---- kill -9 of xbd-back under I/O: the guests see a pause, not a lost disk ----
# (the crash journal: a restart re-executes what was taken and not answered)
d3=$(xl domid xbd3)
B3=$(be_path $XBD_SLOT xbd3 51728); F3=$(fe_path xbd3 51728)
r0=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0')
sleep 1   # into a round's writes
t0=$(up)
kill -KILL $XBD_PID; wait $XBD_PID 2>/dev/null
echo "---- killed with SIGKILL under I/O, restarted 1.5 s later" >>$L/xbd-back.log
sleep 1.5
if xbd_start; then
	r1=$r0
	for i in $(seq 240); do
		r1=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0'); [ $r1 -ge $((r0 + 2)) ] && break
		glog xbd3 | grep -q '^DOMU-ROUND .*rc=[1-9]' && break
		xl domid xbd3 >/dev/null 2>&1 || break
		sleep 0.5
	done
	dt=$(since $t0)
	bad=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=[1-9]')
	st="$(xenstore-read $B3/state 2>&1)/$(xenstore-read $F3/state 2>&1)"
	res=$(sed -n '/^---- killed with SIGKILL/,$p' $L/xbd-back.log | grep -a "$XBD_SLOT/$d3/51728: resumed after an unclean stop" | tail -1 | sed "s/^xbd-back: //")
	redo=$(echo "$res" | sed -n 's/.*: \([0-9]*\) requests\{0,1\} re-executed.*/\1/p')
	note="xbd3's write+verify rounds: $((r1 - r0)) more verified after the kill, $bad failed; backend/frontend state $st; xbd-back: ${res:-no resume line} (${dt}s from the kill to the second verified round)"
	if [ $r1 -ge $((r0 + 2)) ] && [ $bad = 0 ] && [ "$st" = 4/4 ] && [ -n "$res" ]; then
		step xbd-kill9 PASS "$note"
	else
		step xbd-kill9 FAIL "$note"
	fi
	echo "XBDT-RESULT-KILL9 redo=${redo:-?} pause_s=$dt" >>$L/results.txt
else
	step xbd-kill9 FAIL "xbd-back did not come back after SIGKILL: $(tail -3 $L/xbd-back.log | tr '\n' '|')"
fi
xbd_crashed "the kill -9 step"
