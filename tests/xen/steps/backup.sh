# step backup: a full and an incremental backup of a running PV guest, from checkpoint views nbdkit xbdview exports in dom0
# needs: cmd:nbdkit cmd:qemu-img cmd:python3
# lines: xbd-backup

# ---- README's "Back up a running guest" on real Xen ----------------------------
# Guest xbk writes new data all the time (domu-init.sh's backup mode) on
# a disk xbd-back serves; cbt is on from the README's configuration block
# (xbd-back's file, SIGHUP) and set again with xbdctl set once it runs.
# c1 with its view, read whole through nbdkit xbdview in dom0 while the
# guest writes (qemu-img convert: dom0's Debian has no nbdcopy): the
# full backup; then the guest paused (xl pause), its disk quiet and
# hashed, c2 made with its view, the guest unpaused; the extents of
# `changes c1 c2 --json` read from c2's export into a copy of the full
# backup while the guest writes (a small NBD reader in Python: dom0's
# python3 has no nbd module); the copy's sha256 must be the disk's at c2
# and not the full backup's; then release and drop.  No VBD is plugged
# into dom0 (its device/vbd stays empty).
VIEWP=$X/nbdkit-xbdview-plugin.so
BK_IMG=/srv/guest-bk.img
if [ ! -f $VIEWP ]; then
	step xbd-backup SKIP "no xbdview plugin in the payload (xbd built without nbdkit's plugin headers)"
else
	bk_bad=
	bk_no() { bk_bad="${bk_bad:+$bk_bad; }$*"; }
	bk_writes() {
		xbdctl stats --json $BK_DEV 2>/dev/null | python3 -c 'import json, sys
print(json.load(sys.stdin)["devices"][0]["stats"]["requests"]["write"])' 2>/dev/null || echo 0
	}
	bk_in_flight() {
		xbdctl stats --format prometheus $BK_DEV 2>/dev/null |
			awk '/^xbd_requests_in_flight\{/ { s += $2 } END { print s + 0 }'
	}
	bk_wait_writes() {  # N: until the disk has N writes more than now (120 s)
		local w0 i; w0=$(bk_writes)
		for i in $(seq 240); do
			[ "$(bk_writes)" -gt $((w0 + $1)) ] && return 0
			xl domid xbk >/dev/null 2>&1 || return 1
			sleep 0.5
		done
		return 1
	}
	# the incremental's reader: NBD's fixed newstyle handshake and simple
	# reads (tests/backup/nbd-extents.py does it with libnbd's module)
	cat >/tmp/bk-extents.py <<'PY'
import json, socket, struct, sys
sock, changes, image = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
def get(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise SystemExit("nbd: the server closed the connection")
        b += c
    return b
magic, opt, flags = struct.unpack(">QQH", get(18))
assert magic == 0x4e42444d41474943 and opt == 0x49484156454F5054, "not an NBD newstyle server"
s.sendall(struct.pack(">I", 3))                    # FIXED_NEWSTYLE | NO_ZEROES
s.sendall(struct.pack(">QII", 0x49484156454F5054, 1, 0))   # NBD_OPT_EXPORT_NAME ""
size, tflags = struct.unpack(">QH", get(10))
if not flags & 2:
    get(124)
n = nbytes = 0
with open(image, "r+b") as img:
    for e in json.load(open(changes))["extents"]:
        off, left = e["offset"], e["length"]
        n += 1
        nbytes += left
        while left:
            k = min(left, 1 << 20)
            s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, n, off, k))
            rmagic, err, handle = struct.unpack(">IIQ", get(16))
            if rmagic != 0x67446698 or err:
                raise SystemExit("nbd: read %d+%d failed: error %d" % (off, k, err))
            img.seek(off)
            img.write(get(k))
            off, left = off + k, left - k
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 0, 0, 0))   # NBD_CMD_DISC
print(n, nbytes)
PY
	rm -f $BK_IMG /srv/bk-full.img /srv/bk-restored.img
	dd if=/dev/zero of=$BK_IMG bs=1M count=64 conv=fsync status=none
	xbd_alive || xbd_start
	# The README's configuration block for the disk, read at SIGHUP by the
	# xbd-back that runs (for the disks attached from then on): cbt = 1,
	# and a scratch store of 64 MiB: a view reserves all of it when it is
	# made, and the default (1 GiB) does not fit on dom0's disk
	BK_CONF=$(xbd-back --help 2>&1 | grep -A1 -e '--config FILE' | sed -n 's|^ *\(/[^ ]*\) if it exists.*|\1|p')
	[ -n "$BK_CONF" ] || BK_CONF=/usr/local/etc/xbd/xbd-back.conf
	mkdir -p "$(dirname $BK_CONF)"
	[ ! -e $BK_CONF ] || cp $BK_CONF /tmp/bk-saved.conf
	printf '[disk %s]\ncbt = 1\ncbt-scratch = 67108864\n' $BK_IMG >>$BK_CONF
	kill -HUP $XBD_PID; sleep 1
	mkcfg xbk 1 backup "" "$(xbd_disk xvdb $BK_IMG)"
	if ! { create xbk && wait_console xbk '^DOMU-BK-ROUND n=1 ' 300; }; then
		step xbd-backup FAIL "guest xbk did not start writing: $(glog xbk | tail -3 | tr '\n' '|')"
	else
		BK_DEV=$XBD_SLOT/$(xl domid xbk)/51728
		t0=$(up)
		xbdctl set $BK_DEV cbt=1 >$L/bk-set.log 2>&1 || bk_no "xbdctl set $BK_DEV cbt=1: $(cat $L/bk-set.log)"
		bk_wait_writes 200 || bk_no "the guest wrote nothing after cbt=1"
		say "backup: cbt on for $BK_DEV, the guest writing; checkpoint c1 --view"
		# ---- c1 and the full backup, the guest writing ----
		xbdctl checkpoint $BK_DEV c1 --view >$L/bk-c1.out 2>&1 || bk_no "checkpoint c1: $(cat $L/bk-c1.out)"
		V1=$(sed -n 's/.* view=\([^ ]*\) .*/\1/p' $L/bk-c1.out)
		w0=$(bk_writes) t1=$(up)
		LD_LIBRARY_PATH=$X/lib timeout 600 nbdkit -U - $VIEWP view="$V1" checkpoint=c1 \
			--run 'qemu-img convert -f raw -O raw "nbd+unix:///?socket=$unixsocket" /srv/bk-full.img' \
			>$L/bk-full.log 2>&1 || bk_no "the full backup (qemu-img convert of c1's export): $(tail -3 $L/bk-full.log | tr '\n' '|')"
		tfull=$(since $t1) wfull=$(($(bk_writes) - w0))
		say "backup: the full backup from c1's view read in ${tfull}s"
		vbd0=$(xenstore-list /local/domain/0/device/vbd 2>/dev/null | tr '\n' ' ')
		xbdctl release $BK_DEV c1 >>$L/bk-c1.out 2>&1 || bk_no "release c1: $(tail -1 $L/bk-c1.out)"
		bk_wait_writes 500 || bk_no "the guest wrote nothing after the full backup"
		# ---- c2 with the guest paused and its disk hashed ----
		t2=$(up)
		xl pause xbk
		for i in $(seq 100); do [ "$(bk_in_flight)" = 0 ] && break; sleep 0.2; done
		[ "$(bk_in_flight)" = 0 ] || bk_no "the paused guest's disk did not go quiet ($(bk_in_flight) in flight)"
		want=$(sha256sum <$BK_IMG | cut -d' ' -f1)
		xbdctl checkpoint $BK_DEV c2 --view >$L/bk-c2.out 2>&1 || bk_no "checkpoint c2: $(cat $L/bk-c2.out)"
		xl unpause xbk
		tpause=$(since $t2)
		say "backup: checkpoint c2 --view made with the guest paused ${tpause}s; the incremental"
		V2=$(sed -n 's/.* view=\([^ ]*\) .*/\1/p' $L/bk-c2.out)
		# ---- the incremental from c2's view, the guest writing ----
		xbdctl changes $BK_DEV c1 c2 --json >$L/bk-changes.json 2>&1 || bk_no "changes c1 c2: $(cat $L/bk-changes.json)"
		cp --sparse=always /srv/bk-full.img /srv/bk-restored.img
		w0=$(bk_writes) t3=$(up)
		LD_LIBRARY_PATH=$X/lib timeout 600 nbdkit -U - $VIEWP view="$V2" checkpoint=c2 \
			--run 'python3 /tmp/bk-extents.py "$unixsocket" '$L/bk-changes.json' /srv/bk-restored.img' \
			>$L/bk-inc.log 2>&1 || bk_no "the incremental (c1 to c2 from c2's export): $(tail -3 $L/bk-inc.log | tr '\n' '|')"
		tinc=$(since $t3) winc=$(($(bk_writes) - w0))
		inc=$(tail -1 $L/bk-inc.log)
		got=$(sha256sum </srv/bk-restored.img | cut -d' ' -f1)
		full=$(sha256sum </srv/bk-full.img | cut -d' ' -f1)
		xbdctl release $BK_DEV c2 >>$L/bk-c2.out 2>&1 || bk_no "release c2: $(tail -1 $L/bk-c2.out)"
		xbdctl drop $BK_DEV c1 >>$L/bk-c2.out 2>&1 || bk_no "drop c1: $(tail -1 $L/bk-c2.out)"
		xbdctl checkpoints $BK_DEV >$L/bk-checkpoints.txt 2>&1
		sed 's/^/  [bk checkpoints] /' $L/bk-checkpoints.txt | head -12
		xbdctl changes $BK_DEV c1 c2 >/dev/null 2>&1 && bk_no "changes from c1 still answers after its drop"
		[ "$got" = "$want" ] || bk_no "the restore (full at c1 + incremental) is not the disk at c2: sha256 ${got:0:16}, want ${want:0:16}"
		[ "$full" != "$want" ] || bk_no "the full backup at c1 is the disk at c2 already: the guest wrote nothing between them"
		[ "$winc" -gt 0 ] || bk_no "the guest wrote nothing while the incremental was read"
		[ -z "$vbd0" ] || bk_no "dom0 has VBDs plugged ($vbd0)"
		note="guest xbk on $BK_DEV (64 MiB, cbt = 1 and cbt-scratch = 64 MiB in $BK_CONF, xbdctl set cbt=1): full backup at c1 $(du -k /srv/bk-full.img | cut -f1) KiB allocated of 64 MiB in ${tfull}s ($wfull guest writes meanwhile); c2 with the guest paused ${tpause}s; incremental c1 to c2 ${inc:-?} (extents bytes) in ${tinc}s ($winc guest writes meanwhile); restore sha256 ${got:0:16} = disk at c2's; ${t0:+$(since $t0)s in all}"
		echo "XBDT-RESULT-BACKUP full_kib=$(du -k /srv/bk-full.img | cut -f1) full_s=$tfull inc_extents=$(echo $inc | cut -d' ' -f1) inc_bytes=$(echo $inc | cut -d' ' -f2) inc_s=$tinc pause_s=$tpause" >>$L/results.txt
		[ -z "$bk_bad" ] && step xbd-backup PASS "$note" || step xbd-backup FAIL "$bk_bad; $note (logs/bk-*)"
		xl destroy xbk >/dev/null 2>&1
		glog xbk >$L/console-xbk.log 2>/dev/null
	fi
	rm -f $BK_IMG /srv/bk-full.img /srv/bk-restored.img   # dom0's disk is small
	# xbd-back's configuration as it was, for the later steps
	if [ -e /tmp/bk-saved.conf ]; then mv /tmp/bk-saved.conf $BK_CONF; else rm -f $BK_CONF; fi
	xbd_alive && kill -HUP $XBD_PID
	xbd_crashed "the backup step"
fi
