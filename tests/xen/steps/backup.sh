# step backup: a full and an incremental backup of a running PV guest, from checkpoint views nbdkit xbdview exports in dom0, across kill -9 of xbd-back and of the worker; the restore serves a guest that verifies
# needs: cmd:nbdkit cmd:qemu-img cmd:python3
# lines: xbd-backup

# ---- README's "Back up a running guest" on real Xen ----------------------------
# Guest xbk (domu-init.sh's backup mode) writes job A with a verify, then
# rounds of 4k random writes with a verify, new data each round, on a
# disk xbd-back serves; cbt is on from the README's configuration block
# (xbd-back's file, SIGHUP) and set again with xbdctl set once it runs.
# c1 with its view, read whole through nbdkit xbdview in dom0 while the
# guest writes (qemu-img convert: dom0's Debian has no nbdcopy): the
# full backup.  Then, the guest writing, kill -9 of xbd-back (restarted)
# and of the disk's worker: neither may leave a block the guest was told
# is written out of the tracking.  Then the guest paused (xl pause), its
# disk quiet and hashed, c2 made with its view, the guest unpaused; the
# extents of `changes c1 c2 --json` read from c2's export into a copy of
# the full backup while the guest writes (a small NBD reader in Python:
# dom0's python3 has no nbd module); the copy's sha256 must be the disk's
# at c2 and not the full backup's; the blocks the extents name that did
# not change are counted (over-reported).  Then release and drop, and
# the restored copy serves a new guest (xbr, mode bkverify) whose fio
# verify of job A and of the last round done before c2 (begun after c1,
# so read from the incremental) passes.  No VBD is plugged into dom0 (its
# device/vbd stays empty).
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
	bk_secs() { local s; s=$(since $1); echo ${s%.*}; }  # T0: whole seconds since
	bk_wait_writes() {  # N: until the disk has N writes more than now (120 s of dom0's time)
		local w0 t; w0=$(bk_writes) t=$(up)
		while [ "$(bk_secs $t)" -lt 120 ]; do
			[ "$(bk_writes)" -gt $((w0 + $1)) ] && return 0
			xl domid xbk >/dev/null 2>&1 || return 1
			glog xbk | grep -q '^DOMU-BK-ROUND .*rc=[1-9]' && return 1
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
	# the blocks of the incremental's extents that hold the same data in
	# the full backup and in the restore: reported changed, not changed
	# (a block written with what it held, or the crash rounds' in-flight
	# writes counted before they were done); and those that changed
	# outside the extents (never allowed: a restore that misses them is
	# not the disk, which the sha256 says too)
	cat >/tmp/bk-over.py <<'PY'
import json, sys
changes, full, restored = sys.argv[1:4]
c = json.load(open(changes))
g = c.get("granularity") or 65536
marked = set()
for e in c["extents"]:
    marked.update(range(e["offset"] // g, (e["offset"] + e["length"] + g - 1) // g))
over = under = 0
with open(full, "rb") as a, open(restored, "rb") as b:
    k = 0
    while True:
        x, y = a.read(g), b.read(g)
        if not x and not y:
            break
        if k in marked and x == y:
            over += 1
        elif k not in marked and x != y:
            under += 1
        k += 1
print(len(marked), over, under, g)
PY
	bk_round() {  # the last round the guest finished with its verify passed
		glog xbk | sed -n 's/^DOMU-BK-ROUND n=\([0-9]*\) rc=0 .*/\1/p' | tail -1
	}
	bk_wait_round() {  # N SECONDS: until round N is done, verified (SECONDS of dom0's time)
		local t; t=$(up)
		while [ "$(bk_secs $t)" -lt $2 ]; do
			[ "$(bk_round)" -ge $1 ] 2>/dev/null && return 0
			glog xbk | grep -q '^DOMU-BK-ROUND .*rc=[1-9]' && return 1
			xl domid xbk >/dev/null 2>&1 || return 1
			sleep 0.5
		done
		return 1
	}
	bk_quiet() {
		[ "$(bk_in_flight)" = 0 ] && xbdctl stats --json $BK_DEV 2>/dev/null | python3 $H/disk-quiet.py
	}
	rm -f $BK_IMG /srv/bk-full.img /srv/bk-restored.img
	dd if=/dev/zero of=$BK_IMG bs=1M count=32 conv=fsync status=none
	xbd_alive || xbd_start
	# The README's configuration block for the disk, read at SIGHUP by the
	# xbd-back that runs (for the disks attached from then on, and by the
	# one restarted after kill -9): cbt = 1, and a scratch store of 32 MiB:
	# a view reserves all of it when it is made, and the default (1 GiB)
	# does not fit on dom0's disk
	BK_CONF=$(xbd-back --help 2>&1 | grep -A1 -e '--config FILE' | sed -n 's|^ *\(/[^ ]*\) if it exists.*|\1|p')
	[ -n "$BK_CONF" ] || BK_CONF=/usr/local/etc/xbd/xbd-back.conf
	mkdir -p "$(dirname $BK_CONF)"
	[ ! -e $BK_CONF ] || cp $BK_CONF /tmp/bk-saved.conf
	printf '[disk %s]\ncbt = 1\ncbt-scratch = 33554432\n' $BK_IMG >>$BK_CONF
	kill -HUP $XBD_PID; sleep 1
	mkcfg xbk 1 backup "" "$(xbd_disk xvdb $BK_IMG)"
	if ! { create xbk && wait_console xbk '^DOMU-BK-ROUND n=1 ' 300 && glog xbk | grep -q '^DOMU-BK-ROUND n=1 rc=0 '; }; then
		step xbd-backup FAIL "guest xbk did not start writing, or its first round failed: $(glog xbk | grep '^DOMU-BK' | tail -3 | tr '\n' '|')"
	else
		BK_DEV=$XBD_SLOT/$(xl domid xbk)/51728
		t0=$(up)
		glog xbk | grep -q '^DOMU-BK-A rc=0' || bk_no "job A's verify failed: $(glog xbk | grep '^DOMU-BK-A')"
		xbdctl set $BK_DEV cbt=1 >$L/bk-set.log 2>&1 || bk_no "xbdctl set $BK_DEV cbt=1: $(cat $L/bk-set.log)"
		say "backup: cbt on for $BK_DEV, the guest writing; checkpoint c1 --view"
		# ---- c1 and the full backup, the guest writing ----
		xbdctl checkpoint $BK_DEV c1 --view >$L/bk-c1.out 2>&1 || bk_no "checkpoint c1: $(cat $L/bk-c1.out)"
		r1=$(bk_round)
		V1=$(sed -n 's/.* view=\([^ ]*\) .*/\1/p' $L/bk-c1.out)
		w0=$(bk_writes) t1=$(up)
		LD_LIBRARY_PATH=$X/lib timeout 600 nbdkit -U - $VIEWP view="$V1" checkpoint=c1 \
			--run 'qemu-img convert -f raw -O raw "nbd+unix:///?socket=$unixsocket" /srv/bk-full.img' \
			>$L/bk-full.log 2>&1 || bk_no "the full backup (qemu-img convert of c1's export): $(tail -3 $L/bk-full.log | tr '\n' '|')"
		tfull=$(since $t1) wfull=$(($(bk_writes) - w0))
		say "backup: the full backup from c1's view read in ${tfull}s"
		vbd0=$(xenstore-list /local/domain/0/device/vbd 2>/dev/null | tr '\n' ' ')
		xbdctl release $BK_DEV c1 >>$L/bk-c1.out 2>&1 || bk_no "release c1: $(tail -1 $L/bk-c1.out)"
		# ---- kill -9 of xbd-back, then of the disk's worker, the guest writing ----
		bk_wait_writes 200 || bk_no "the guest wrote nothing after the full backup"
		kill -KILL $XBD_PID; wait $XBD_PID 2>/dev/null
		echo "---- step backup: killed with SIGKILL under the guest's writes, restarted 1 s later" >>$L/xbd-back.log
		sleep 1
		xbd_start || bk_no "xbd-back did not come back after SIGKILL"
		kres=
		for i in $(seq 120); do
			kres=$(sed -n '/^---- step backup: killed/,$p' $L/xbd-back.log | grep -a "$BK_DEV: resumed after an unclean stop" | tail -1)
			[ -n "$kres" ] && break; sleep 0.5
		done
		[ -n "$kres" ] || bk_no "no 'resumed after an unclean stop' line for $BK_DEV after kill -9 of xbd-back"
		say "backup: kill -9 of xbd-back, restarted: ${kres:-no resume line}"
		bk_wait_writes 200 || bk_no "the guest wrote nothing after kill -9 of xbd-back"
		wpid=$(xbdctl stats --json $BK_DEV 2>/dev/null | grep -o '"worker":{"pid":[0-9]*' | head -1 | sed 's/.*"pid"://')
		wres=
		if [ "${wpid:-0}" -gt 1 ]; then   # (never kill 0: this script's process group)
			kill -KILL $wpid
			for i in $(seq 120); do
				wres=$(grep -a "$BK_DEV: resumed after its worker died" $L/xbd-back.log | tail -1)
				[ -n "$wres" ] && break; sleep 0.5
			done
			[ -n "$wres" ] || bk_no "no 'resumed after its worker died' line for $BK_DEV after kill -9 of worker $wpid"
		else
			bk_no "no worker pid for $BK_DEV in xbdctl stats --json"
		fi
		# a round begun after c1 and finished after both kills, verified
		rk=$(bk_round)
		say "backup: kill -9 of worker ${wpid:-?}: ${wres:-no resume line}; rounds done: $r1 at c1, $rk now"
		bk_wait_round $(( (r1 > rk ? r1 : rk) + 2 )) 240 ||
			bk_no "the guest's round $(( (r1 > rk ? r1 : rk) + 2 )) did not finish verified: $(glog xbk | grep '^DOMU-BK-ROUND' | tail -1)"
		# ---- c2 with the guest paused and its disk hashed ----
		t2=$(up)
		xl pause xbk
		for i in $(seq 100); do bk_quiet && break; sleep 0.2; done
		bk_quiet || bk_no "the paused guest's disk did not go quiet ($(bk_in_flight) in flight, or a ring not asleep with all taken)"
		want=$(sha256sum <$BK_IMG | cut -d' ' -f1)
		r2=$(bk_round)
		xbdctl checkpoint $BK_DEV c2 --view >$L/bk-c2.out 2>&1 || bk_no "checkpoint c2: $(cat $L/bk-c2.out)"
		xl unpause xbk
		tpause=$(since $t2)
		say "backup: checkpoint c2 --view made with the guest paused ${tpause}s (rounds done: $r1 at c1, $r2 at c2); the incremental"
		V2=$(sed -n 's/.* view=\([^ ]*\) .*/\1/p' $L/bk-c2.out)
		# ---- the incremental from c2's view, the guest writing ----
		xbdctl changes $BK_DEV c1 c2 --json >$L/bk-changes.json 2>&1 || bk_no "changes c1 c2 (across kill -9 of xbd-back and of the worker): $(cat $L/bk-changes.json)"
		cp --sparse=always /srv/bk-full.img /srv/bk-restored.img
		w0=$(bk_writes) t3=$(up)
		LD_LIBRARY_PATH=$X/lib timeout 600 nbdkit -U - $VIEWP view="$V2" checkpoint=c2 \
			--run 'python3 /tmp/bk-extents.py "$unixsocket" '$L/bk-changes.json' /srv/bk-restored.img' \
			>$L/bk-inc.log 2>&1 || bk_no "the incremental (c1 to c2 from c2's export): $(tail -3 $L/bk-inc.log | tr '\n' '|')"
		tinc=$(since $t3) winc=$(($(bk_writes) - w0))
		inc=$(tail -1 $L/bk-inc.log)
		got=$(sha256sum </srv/bk-restored.img | cut -d' ' -f1)
		full=$(sha256sum </srv/bk-full.img | cut -d' ' -f1)
		over=$(python3 /tmp/bk-over.py $L/bk-changes.json /srv/bk-full.img /srv/bk-restored.img 2>&1)
		read -r bk_marked bk_over bk_under bk_gran <<<"$over"
		[ "${bk_under:-x}" = 0 ] || bk_no "blocks changed outside the extents of changes c1 c2 (marked over under granularity): $over"
		xbdctl release $BK_DEV c2 >>$L/bk-c2.out 2>&1 || bk_no "release c2: $(tail -1 $L/bk-c2.out)"
		xbdctl drop $BK_DEV c1 >>$L/bk-c2.out 2>&1 || bk_no "drop c1: $(tail -1 $L/bk-c2.out)"
		xbdctl checkpoints $BK_DEV >$L/bk-checkpoints.txt 2>&1
		sed 's/^/  [bk checkpoints] /' $L/bk-checkpoints.txt | head -12
		xbdctl changes $BK_DEV c1 c2 >/dev/null 2>&1 && bk_no "changes from c1 still answers after its drop"
		[ "$got" = "$want" ] || bk_no "the restore (full at c1 + incremental) is not the disk at c2: sha256 ${got:0:16}, want ${want:0:16}"
		[ "$full" != "$want" ] || bk_no "the full backup at c1 is the disk at c2 already: the guest wrote nothing between them"
		[ "$winc" -gt 0 ] || bk_no "the guest wrote nothing while the incremental was read"
		[ -z "$vbd0" ] || bk_no "dom0 has VBDs plugged ($vbd0)"
		bad=$(glog xbk | grep -c '^DOMU-BK-ROUND .*rc=[1-9]')
		[ "$bad" = 0 ] || bk_no "$bad of the guest's rounds failed their verify: $(glog xbk | grep '^DOMU-BK-ROUND .*rc=[1-9]' | head -2 | tr '\n' '|')"
		note="guest xbk on $BK_DEV (32 MiB, cbt = 1 and cbt-scratch = 32 MiB in $BK_CONF, xbdctl set cbt=1): full backup at c1 $(du -k /srv/bk-full.img | cut -f1) KiB allocated of 32 MiB in ${tfull}s ($wfull guest writes meanwhile); kill -9 of xbd-back (${kres:+resumed}) and of worker ${wpid:-?} (${wres:+resumed}); c2 with the guest paused ${tpause}s, rounds $((r1 + 1))-$r2 between; incremental c1 to c2 ${inc:-?} (extents bytes) in ${tinc}s ($winc guest writes meanwhile), ${bk_marked:-?} blocks of ${bk_gran:-?} bytes marked, ${bk_over:-?} of them unchanged (over-reported), ${bk_under:-?} changed unmarked; restore sha256 ${got:0:16} = disk at c2's; guest rounds verified: $(bk_round), failed: $bad; ${t0:+$(since $t0)s}"
		echo "XBDT-RESULT-BACKUP full_kib=$(du -k /srv/bk-full.img | cut -f1) full_s=$tfull inc_extents=$(echo $inc | cut -d' ' -f1) inc_bytes=$(echo $inc | cut -d' ' -f2) inc_s=$tinc pause_s=$tpause marked=${bk_marked:-?} over=${bk_over:-?} under=${bk_under:-?}" >>$L/results.txt
		[ -z "$bk_bad" ] && step xbd-backup PASS "$note" || step xbd-backup FAIL "$bk_bad; $note (logs/bk-*)"
		xl destroy xbk >/dev/null 2>&1
		glog xbk >$L/console-xbk.log 2>/dev/null
		# ---- the restore serves a guest: job A's and round r2's data verify ----
		if [ "$got" = "$want" ] && [ "${r2:-0}" -gt "$((r1 + 1))" ]; then
			mkcfg xbr 1 bkverify "xbdt.bkround=$r2" "$(xbd_disk xvdb /srv/bk-restored.img)"
			t4=$(up)
			if create xbr && wait_console xbr '^DOMU-BKV-ROUND ' 300; then
				va=$(glog xbr | sed -n 's/^DOMU-BKV-A rc=\([0-9]*\).*/\1/p') vr=$(glog xbr | sed -n 's/^DOMU-BKV-ROUND n=[0-9]* rc=\([0-9]*\).*/\1/p')
				rnote="guest xbr on the restored image (xbd-back): fio verify_only of job A (8 MiB, written before c1) rc=$va, of round $r2 (2 MiB, written after c1: from the incremental) rc=$vr; $(since $t4)s"
				[ "$va" = 0 ] && [ "$vr" = 0 ] && step xbd-backup-restored PASS "$rnote" || step xbd-backup-restored FAIL "$rnote"
			else
				step xbd-backup-restored FAIL "guest xbr on the restored image did not verify: $(glog xbr | tail -3 | tr '\n' '|')"
			fi
			xl destroy xbr >/dev/null 2>&1
			glog xbr >$L/console-xbr.log 2>/dev/null
		else
			step xbd-backup-restored FAIL "no restore to serve: sha256 ${got:0:16} (disk at c2: ${want:0:16}), rounds $r1 at c1 and ${r2:-?} at c2 (a round begun after c1 is needed)"
		fi
	fi
	rm -f $BK_IMG /srv/bk-full.img /srv/bk-restored.img   # dom0's disk is small
	# xbd-back's configuration as it was, for the later steps
	if [ -e /tmp/bk-saved.conf ]; then mv /tmp/bk-saved.conf $BK_CONF; else rm -f $BK_CONF; fi
	xbd_alive && kill -HUP $XBD_PID
	xbd_crashed "the backup step"
fi
