#!/bin/sh
# xbd-back's NBD engine (params nbd+unix:///EXPORT?socket=PATH, nbd://...):
# data reads back through nbdkit memory and through a qcow2 image served
# by qemu-nbd; the server's multi-conn, FUA and block sizes decide the
# queues, the FUA flag and sector-size; a server that goes away fails
# requests (with a log line) instead of hanging, and is found again.
. "$top_srcdir/tests/blkback/common.sh"
NBDKIT=${NBDKIT:-nbdkit}
[ "$NBDKIT" != no ] && command -v "$NBDKIT" >/dev/null 2>&1 || skip "nbdkit not installed"
command -v qemu-nbd >/dev/null 2>&1 || skip "qemu-nbd (qemu-utils) not installed"
command -v qemu-img >/dev/null 2>&1 || skip "qemu-img (qemu-utils) not installed"

# serve NAME ARGS...: nbdkit ARGS on $WORK/NAME.sock in the background; NPID.
serve() {
	_n=$1
	shift
	rm -f "$WORK/$_n.sock"
	"$NBDKIT" -U "$WORK/$_n.sock" -f "$@" 2>>"$WORK/nbdkit.log" &
	NPID=$!
	sim_on_exit "kill $NPID 2>/dev/null"
	sim_wait_for 5 test -S "$WORK/$_n.sock" || fail "nbdkit $* did not start"
}

dom=$(new_domain)
start_back --max-queues 4 --nbd-retry-ms 200 --nbd-connect-timeout-ms 2000 \
	--disk "*wt.sock:cache=writethrough" --disk "nbd+unix*v3.sock:cache=writethrough"
sim_wait_for 5 test -S "$SIMDIR/xbd-back.0.sock" || bk_fail "xbd-back did not start"

# 1. nbdkit memory (multi-conn, FUA, trim): the data path and what is advertised.
serve mem --filter=log memory 64M logfile="$WORK/mem.log"
a=$(add_disk "$dom" xvdb "nbd+unix:///?socket=$WORK/mem.sock")
wait_state "$dom" "$a" 2
[ "$(bkey "$dom" "$a" sectors)" = 131072 ] || bk_fail "64M export is not 131072 sectors"
[ "$(bkey "$dom" "$a" sector-size)" = 512 ] || bk_fail "sector-size $(bkey "$dom" "$a" sector-size)"
[ "$(bkey "$dom" "$a" multi-queue-max-queues)" = 4 ] || bk_fail "a multi-conn server should get 4 queues"
[ "$(bkey "$dom" "$a" feature-discard)" = 1 ] || bk_fail "trim not offered as discard"
[ "$(bkey "$dom" "$a" feature-flush-cache)" = 1 ] || bk_fail "no flush-cache"
for sc in rw flush discard indirect; do
	front_ok "$dom" "$a" "$sc"
done
grep -q "Flush" "$WORK/mem.log" || bk_fail "no NBD flush reached the server"
grep -q "Trim" "$WORK/mem.log" || bk_fail "no NBD trim reached the server"
# backend/vbd3 (libxl's backendtype=tap writes params "aio:nbd+unix:..."): the
# same server through the NBD engine, and a [disk] pattern on what the xl line said.
serve v3 memory 16M
v=$(add_disk "$dom" xvdn "nbd+unix:///?socket=$WORK/v3.sock" --type vbd3)
wait_state "$dom" "$v" 2 vbd3
grep -q "vbd3/$dom/$v: opened nbd+unix:///?socket=$WORK/v3.sock (nbd engine, .*cache writethrough" "$LOG" ||
	bk_fail "the vbd3 disk was not opened by the NBD engine with its [disk] rule: $(grep "vbd3/$dom/$v" "$LOG" | head -2)"
front_ok "$dom" "$v" rw
# Every queue its own connection: 2 queues, stress verifying every read.
b=$(add_disk "$dom" xvdc "nbd+unix:///?socket=$WORK/mem.sock")
wait_state "$dom" "$b" 2
"$XBD_SIM" disk remove "$SIMDIR" "$dom" "$a" --timeout 5 || bk_fail "detach of $a"
serve mem2 memory 64M
c=$(add_disk "$dom" xvdd "nbd+unix:///?socket=$WORK/mem2.sock")
wait_state "$dom" "$c" 2
front_ok "$dom" "$c" --queues 2 --qd 32 --secs 1 stress
grep -q "stress: .* on 2 queue(s), all verified" "$WORK/out" || bk_fail "stress on 2 queues"

# 2. No multi-conn: one queue.  No FUA at the server: a durable write is write + flush.
serve wt --filter=log --filter=fua --filter=multi-conn memory 16M \
	multi-conn-mode=disable logfile="$WORK/wt.log"
d=$(add_disk "$dom" xvde "nbd+unix:///?socket=$WORK/wt.sock")
wait_state "$dom" "$d" 2
[ "$(bkey "$dom" "$d" multi-queue-max-queues)" = 1 ] || bk_fail "a server without multi-conn got $(bkey "$dom" "$d" multi-queue-max-queues) queues"
front_ok "$dom" "$d" rw
grep -q "Write.*fua=1" "$WORK/wt.log" && bk_fail "FUA sent to a server without it"
grep -q "Flush" "$WORK/wt.log" || bk_fail "writethrough on a server without FUA: no flush"
# The same with FUA: writethrough writes carry the flag.
serve fua --filter=log memory 16M logfile="$WORK/fua.log"
e=$(add_disk "$dom" xvdf "nbd+unix:///?socket=$WORK/fua.sock")
"$XBDCTL" --socket "$SIMDIR/xbd-back.0.sock" list >/dev/null
wait_state "$dom" "$e" 2
front "$dom" --dev "$e" rw >>"$WORK/out" 2>&1 || bk_fail "rw on $e"
# (the disk rule above is for *wt.sock only: here plain writeback, no FUA)
grep -q "Write.*fua=1" "$WORK/fua.log" && bk_fail "FUA on a writeback disk"

# 3. The server's block sizes: 4 KiB minimum is sector-size, 64 KiB maximum splits.
serve bs --filter=log --filter=blocksize-policy memory 16M blocksize-minimum=4096 \
	blocksize-preferred=65536 blocksize-maximum=65536 blocksize-error-policy=error \
	logfile="$WORK/bs.log"
f=$(add_disk "$dom" xvdg "nbd+unix:///?socket=$WORK/bs.sock")
wait_state "$dom" "$f" 2
[ "$(bkey "$dom" "$f" sector-size)" = 4096 ] || bk_fail "minimum block 4096 gave sector-size $(bkey "$dom" "$f" sector-size)"
[ "$(bkey "$dom" "$f" physical-sector-size)" = 65536 ] || bk_fail "preferred block 65536 gave physical-sector-size $(bkey "$dom" "$f" physical-sector-size)"
front_ok "$dom" "$f" indirect
grep -q "Write.*count=0x10000 " "$WORK/bs.log" || bk_fail "no 64 KiB pieces of the large write"
if grep "count=" "$WORK/bs.log" | grep -v "Trim\|Zero" | grep -q "count=0x[0-9a-f]\{6,\}"; then
	bk_fail "a command larger than the server's 64 KiB maximum"
fi
grep -q "error" "$WORK/bs.log" && bk_fail "the server refused a request: $(grep error "$WORK/bs.log" | head -1)"

# 4. A qcow2 image through qemu-nbd: the data lands in the image.
qemu-img create -q -f qcow2 "$WORK/disk.qcow2" 32M || fail "qemu-img create"
qemu-nbd -f qcow2 -k "$WORK/q.sock" -t "$WORK/disk.qcow2" 2>>"$WORK/nbdkit.log" &
QPID=$!
sim_on_exit "kill $QPID 2>/dev/null"
sim_wait_for 5 test -S "$WORK/q.sock" || fail "qemu-nbd did not start"
g=$(add_disk "$dom" xvdh "nbd+unix:///?socket=$WORK/q.sock")
wait_state "$dom" "$g" 2
[ "$(bkey "$dom" "$g" sectors)" = 65536 ] || bk_fail "qcow2 32M is $(bkey "$dom" "$g" sectors) sectors"
front_ok "$dom" "$g" rw
"$XBD_SIM" disk remove "$SIMDIR" "$dom" "$g" --timeout 5 || bk_fail "detach of $g"
kill "$QPID"
wait "$QPID" 2>/dev/null
qemu-img map -f qcow2 --output=json "$WORK/disk.qcow2" | grep -q '"data": true' ||
	bk_fail "the qcow2 image has no data after the writes"

# The same image through qemu-storage-daemon, started as xbd-back.conf(5) shows.
if command -v qemu-storage-daemon >/dev/null 2>&1; then
	# A fresh image: stress starts from zeros.
	qemu-img create -q -f qcow2 "$WORK/disk2.qcow2" 32M || fail "qemu-img create"
	qemu-storage-daemon --blockdev driver=file,node-name=f,filename="$WORK/disk2.qcow2" \
		--blockdev driver=qcow2,node-name=q,file=f \
		--nbd-server addr.type=unix,addr.path="$WORK/qsd.sock" \
		--export type=nbd,id=e,node-name=q,name=disk,writable=on 2>>"$WORK/nbdkit.log" &
	QPID=$!
	sim_on_exit "kill $QPID 2>/dev/null"
	sim_wait_for 5 test -S "$WORK/qsd.sock" || fail "qemu-storage-daemon did not start"
	# (discard-enable=0: qcow2 need not read back zeros after a discard, which stress expects)
	g=$(add_disk "$dom" xvdm "nbd+unix:///disk?socket=$WORK/qsd.sock" --discard-enable 0)
	wait_state "$dom" "$g" 2
	front_ok "$dom" "$g" --queues 2 --qd 16 --secs 1 stress
	"$XBD_SIM" disk remove "$SIMDIR" "$dom" "$g" --timeout 5 || bk_fail "detach of $g"
	kill "$QPID"
	wait "$QPID" 2>/dev/null
	qemu-img check -q -f qcow2 "$WORK/disk2.qcow2" || bk_fail "qcow2 image damaged"
else
	echo "qemu-storage-daemon not installed: its part skipped"
fi

# 5. The server goes away under I/O and comes back (same socket, same file).
truncate -s 16M "$WORK/out.img"
serve out file "$WORK/out.img"
h=$(add_disk "$dom" xvdi "nbd+unix:///?socket=$WORK/out.sock")
wait_state "$dom" "$h" 2
front "$dom" --dev "$h" --secs 4 outage >"$WORK/out.outage" 2>&1 &
OPID=$!
sleep 1
kill "$NPID"
wait "$NPID" 2>/dev/null
sleep 1
serve out file "$WORK/out.img"
wait "$OPID" || { cat "$WORK/out.outage"; bk_fail "outage scenario failed"; }
cat "$WORK/out.outage"
grep -q "vbd\|nbd.*connection to the NBD server lost" "$LOG" || bk_fail "no log line for the lost server"
grep -q "reconnected to the NBD server" "$LOG" || bk_fail "no log line for the reconnect"

# 6. A missing server and bad URIs: one line each saying why, no device served.
i=$(add_disk "$dom" xvdj "nbd+unix:///?socket=$WORK/none.sock")
j=$(add_disk "$dom" xvdk "nbd://[bad/x")
k=$(add_disk "$dom" xvdl "nbd+unix:///?socket=$WORK/mem.sock&tls-psk-file=/etc/shadow")
sim_wait_for 5 grep -q "none.sock: cannot connect to the NBD server: .*No such file" "$LOG" ||
	bk_fail "no message for a missing server"
sim_wait_for 5 grep -q "nbd://\[bad/x: invalid NBD URI: .*unable to parse URI" "$LOG" ||
	bk_fail "no message for a bad URI"
sim_wait_for 5 grep -q "tls-psk-file=/etc/shadow: invalid NBD URI: .*local file access .* not allowed" "$LOG" ||
	bk_fail "a URI naming a local file was not refused"
# However often xenstore events retry the open: one connect a second, one line.
[ "$(grep -c "none.sock: cannot connect to the NBD server" "$LOG")" = 1 ] ||
	bk_fail "the missing server was reported $(grep -c "none.sock: cannot connect" "$LOG") times"
for n in "$i" "$j" "$k"; do
	[ "$(bstate "$dom" "$n")" != 4 ] || bk_fail "device $n connected without storage"
done
bk_done
