# step destroy: xl destroy xbd1 under I/O: xbd-back cleans up and keeps serving xbd3
# needs: xbd-back guest:xbd1 step:hotplug
# lines: destroy-

wait_console xbd1 DOMU-IOLOOP-START 60
sleep 3
d1=$(xl domid xbd1)
r0=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0')
t0=$(up)
xl destroy xbd1 >$L/xl-destroy.log 2>&1; rc=$?
dt=$(since $t0)
for i in $(seq 40); do
	xenstore-read /local/domain/0/backend/$XBD_SLOT/$d1 >/dev/null 2>&1 || break; sleep 0.5
done
xenstore-ls -fp /local/domain/0/backend/$XBD_SLOT/$d1 >$L/xs-after-destroy.txt 2>&1 && left=yes || left=no
if [ $rc = 0 ] && [ $left = no ] && xbd_alive; then
	step destroy-cleanup PASS "xl destroy under I/O rc=0 in ${dt}s; backend/$XBD_SLOT/$d1 gone; xbd-back alive"
else
	step destroy-cleanup FAIL "rc=$rc (${dt}s) backend-dir-left=$left xbd-back-alive=$(xbd_alive && echo yes || echo no)"
fi
grep -i -E "dom(ain)?[ =]*$d1|/$d1/" $L/xbd-back.log | tail -8 | sed 's/^/  [xbd-back] /'
if xl domid xbd3 >/dev/null 2>&1; then
	r1=$r0
	for i in $(seq 120); do
		r1=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=0'); [ $r1 -ge $((r0 + 3)) ] && break
		glog xbd3 | grep -q '^DOMU-ROUND .*rc=[1-9]' && break
		sleep 1
	done
	bad=$(glog xbd3 | grep -c '^DOMU-ROUND .*rc=[1-9]')
	if [ $r1 -ge $((r0 + 3)) ] && [ $bad = 0 ]; then
		step destroy-others-served PASS "xbd3 completed $((r1 - r0)) more write+verify rounds after xbd1's destroy"
	else
		step destroy-others-served FAIL "xbd3: $((r1 - r0)) rounds ok after destroy, $bad failed"
	fi
else
	step destroy-others-served SKIP "no second guest running"
fi
