# step nbd: a qcow2 image served over NBD by qemu-storage-daemon, xbd-back's NBD engine
# needs: none
# lines: xbd-nbd

# ---- a qcow2 image served over NBD by qemu-storage-daemon in dom0 ----------
QSD_SOCK=/run/qsd-guest.sock
if ! command -v qemu-storage-daemon >/dev/null; then
	step xbd-nbd-qcow2 SKIP "no qemu-storage-daemon in dom0"
elif [ ! -f $X/guest.qcow2 ]; then
	step xbd-nbd-qcow2 FAIL "no qcow2 image in the payload"
else
	xbd_alive || xbd_start
	cp $X/guest.qcow2 /srv/guest.qcow2
	q0=$(du -k /srv/guest.qcow2 | cut -f1)
	rm -f $QSD_SOCK
	qemu-storage-daemon --blockdev driver=file,node-name=f,filename=/srv/guest.qcow2,cache.direct=on \
		--blockdev driver=qcow2,node-name=q,file=f \
		--nbd-server addr.type=unix,addr.path=$QSD_SOCK \
		--export type=nbd,id=e,node-name=q,name=disk,writable=on >$L/qsd.log 2>&1 &
	QSD=$!
	for i in $(seq 100); do [ -S $QSD_SOCK ] && break; sleep 0.2; done
	# the table's jobs in the boot that measures costs (make check-xen-cost), else the verify job
	want profile && nj= || nj=xbdt.jobs=verify
	mkcfg xnb 1 none "$nj" "$(xbd_disk xvdb "nbd+unix:///disk?socket=$QSD_SOCK")"
	guest_jobs xnb xbd nbd; rc=$?
	eng=$(grep -a -o "$XBD_SLOT/[0-9]*/51728: opened nbd+unix:///disk[^ ]* (nbd engine[^)]*)" $L/xbd-back.log | tail -1)
	xl destroy xnb >/dev/null 2>&1
	kill $QSD 2>/dev/null; wait $QSD 2>/dev/null
	q1=$(du -k /srv/guest.qcow2 | cut -f1)
	rm -f /srv/guest.qcow2   # dom0's disk is small: the later steps need the room
	note="the guest's xvdb is /srv/guest.qcow2 through qemu-storage-daemon (nbd+unix); xbd-back: ${eng:-no NBD open in its log}; the qcow2 file ${q0}k -> ${q1}k allocated"
	if [ $rc = 0 ] && [ -n "$eng" ] && [ $q1 -gt $q0 ]; then step xbd-nbd-qcow2 PASS "$note"
	else step xbd-nbd-qcow2 FAIL "jobs rc=$rc; $note (logs/qsd.log)"; fi
	xbd_crashed "the NBD step"
fi
