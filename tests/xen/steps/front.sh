# step front: xbd-front in dom0 (check, nbdkit + fio) on a disk served by kernel blkback
# needs: none
# lines: front-

# ---- xbd-front in dom0 against kernel blkback ---------------------------------
if ! command -v xbd-front >/dev/null; then
	STEP_G=- step front-check SKIP "xbd-front is not built"
else
	xl block-attach 0 "format=raw, vdev=xvdd, access=rw, target=/srv/front.img" >$L/xl-attach-dom0.log 2>&1
	rc=$?
	if [ $rc != 0 ]; then
		STEP_G=- step front-attach FAIL "xl block-attach 0 xvdd rc=$rc: $(grep -v debug: $L/xl-attach-dom0.log | tail -3)"
	else
		STEP_G=- step front-attach PASS "kernel blkback serves dom0's device/vbd/51760"
		timeout 300 xbd-front check --vdev xvdd --platform xen >$L/front-check.log 2>&1; rc=$?
		sed 's/^/  [xbd-front check] /' $L/front-check.log | head -40
		[ $rc = 0 ] && STEP_G=- step front-check PASS "$(grep -c '^ok' $L/front-check.log) ok, $(grep -c '^skip' $L/front-check.log) skipped" ||
			STEP_G=- step front-check FAIL "rc=$rc, $(grep -c '^FAIL \[' $L/front-check.log) failed: $(grep '^FAIL \[' $L/front-check.log | head -2 | tr '\n' '|') (logs/front-check.log)"
		if command -v nbdkit >/dev/null && [ -f $X/nbdkit-xbd-plugin.so ]; then
			cat >/tmp/nbd.fio <<FIO
[global]
ioengine=nbd
uri=\${NBDURI}
rw=randwrite
bs=4k
size=16m
iodepth=8
verify=crc32c
verify_fatal=1
do_verify=1
[nbd-verify]
FIO
			d0=$(dticks); snap /tmp/snap0
			LD_LIBRARY_PATH=$X/lib timeout 300 nbdkit -f -U - $X/nbdkit-xbd-plugin.so vdev=xvdd platform=xen \
				--run 'NBDURI="$uri" fio --minimal /tmp/nbd.fio' >$L/front-nbd.log 2>&1; rc=$?
			d1=$(dticks); snap /tmp/snap1
			tail -1 $L/front-nbd.log | awk -F';' -v rc=$rc -v b=$(bdelta blkback /tmp/snap0 /tmp/snap1) -v d=$((d1 - d0)) -v tck=$TCK '
			{ ios = ($6 + $47) / 4; bc = b / tck; dc = d / tck
			  printf "XBDT-RESULT backend=blkback run=front job=nbd-verify rc=%s iops=%.0f bw_kib=%d ios=%d verify=%s bcpu=%.2f dcpu=%.2f bus=%.0f dus=%.0f\n",
			    rc, $8 + $49, $7 + $48, ios, rc == 0 ? "ok" : "FAIL", bc, dc, ios ? bc * 1e6 / ios : 0, ios ? dc * 1e6 / ios : 0 }' |
				tee -a $L/results.txt
			[ $rc = 0 ] && STEP_G=- step front-nbd-fio PASS "nbdkit xbd + fio ioengine=nbd verify=crc32c (16M)" ||
				STEP_G=- step front-nbd-fio FAIL "rc=$rc: $(grep -v '^3;' $L/front-nbd.log | tail -5)"
		else
			STEP_G=- step front-nbd-fio SKIP "no nbdkit in dom0 or no xbd plugin in the payload"
		fi
		xl block-detach 0 xvdd >>$L/xl-attach-dom0.log 2>&1 || say "block-detach 0 xvdd failed"
	fi
fi
