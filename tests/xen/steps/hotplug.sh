# step hotplug: xl block-detach xvdb, block-attach xvdc on xbd1 while it runs
# needs: xbd-back guest:xbd1
# lines: hotplug-

B=$(be_path $XBD_SLOT xbd1 51728)
t0=$(up)
xl block-detach xbd1 xvdb >$L/xl-block-detach.log 2>&1; rc=$?
gone=no; wait_console xbd1 DOMU-XVDB-GONE 120 && gone=yes
xenstore-read $B/state >/dev/null 2>&1 && left=yes || left=no
if [ $rc = 0 ] && [ $gone = yes ] && [ $left = no ] && xbd_alive; then
	step hotplug-detach PASS "xl block-detach rc=0 in $(since $t0)s; guest lost xvdb; backend dir removed"
else
	step hotplug-detach FAIL "rc=$rc guest-saw-removal=$gone backend-dir-left=$left: $(tail -3 $L/xl-block-detach.log)"
fi
t0=$(up)
xl block-attach xbd1 "$(xbd_disk xvdc /srv/guest-c.img)" \
	>$L/xl-block-attach.log 2>&1; rc=$?
wait_console xbd1 'DOMU-XVDC-DONE|DOMU-NO-XVDC' 300
res=$(glog xbd1 | grep '^DOMU-JOB-RESULT job=verify-c')
if [ $rc = 0 ] && echo "$res" | grep -q 'rc=0 .*verify=ok'; then
	step hotplug-attach PASS "xl block-attach xvdc rc=0; guest wrote+verified 16M on xvdc ($(since $t0)s)"
else
	step hotplug-attach FAIL "rc=$rc: $(tail -3 $L/xl-block-attach.log) guest: ${res:-no result}"
fi
