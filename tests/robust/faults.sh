#!/bin/sh
# Storage faults reach the guest as BLKIF_RSP_ERROR and touch nothing else.
# The fault engine (blkback/engines/engine-fault.c, params fault:SPEC:PATH) fails
# chosen operations with EIO or ENOSPC:
#  - on the wire (rawfront): a failed write, flush or discard is answered
#    BLKIF_RSP_ERROR (EOPNOTSUPP from the storage: BLKIF_RSP_EOPNOTSUPP);
#  - through nbdkit: fio reading or writing the faulted sectors reports an
#    I/O error (EIO: blkif carries no errno), while another fio on the same
#    disk and connection, with verify=crc32c, passes with 0 errors;
#  - ENOSPC after K writes: later writes fail, reads still verify;
#  - partial submission (eagain@all) loses and corrupts nothing;
#  - xbd-back logs each failure with the device, sector and errno.
. "$top_srcdir/tests/robust/lib.sh"

G=$(new_domain)
for i in 1 2 3 4 5; do truncate -s 16M "$WORK/f$i.img"; done
d1=$(add_disk "$G" 5001 "fault:eio@write-sector=8-15:$WORK/f1.img")
d2=$(add_disk "$G" 5002 "fault:eio@flush-after=0:$WORK/f2.img")
d3=$(add_disk "$G" 5003 "fault:eopnotsupp@discard:$WORK/f3.img")
d4=$(add_disk "$G" 5004 "fault:eagain@all:$WORK/f4.img")
d5=$(add_disk "$G" 5005 "fault:eio@sector=8-15:null:16M")
start_back

# rawfront SCENARIO must die on exactly this status for this request.
wire() { # DEV SCENARIO EXPECTED-MESSAGE
	front "$G" --dev "$1" "$2" >"$WORK/w.txt" 2>&1 && { cat "$WORK/w.txt"; bk_fail "$2 on a faulted disk succeeded"; }
	grep -q "$3" "$WORK/w.txt" || { cat "$WORK/w.txt"; bk_fail "$2: expected '$3'"; }
	echo "ok: $2 on $1: $3"
}
wire "$d1" rw "rawfront: write: status -1, expected 0"
wire "$d2" flush "rawfront: flush: status -1, expected 0"
wire "$d3" discard "rawfront: discard: status -2, expected 0"
wire "$d5" rw "rawfront: write: status -1, expected 0"
# Partial submissions: every request still completes once, with the right data.
front "$G" --dev "$d4" --qd 32 --secs 1 stress >"$WORK/w.txt" 2>&1 ||
	{ cat "$WORK/w.txt"; bk_fail "stress with partial submissions failed"; }
grep "stress:" "$WORK/w.txt"
grep -q "vbd/$G/$d1: I/O error on op 1 sector 8: Input/output error" "$LOG" || bk_fail "no log line for the EIO write"
grep -q "vbd/$G/$d2: I/O error on op 3 sector 0: Input/output error" "$LOG" || bk_fail "no log line for the EIO flush"

if have_fio_nbd; then
	# Sectors 16384..16391 (8 MiB) fail with EIO, sectors 20480..20487 (10 MiB)
	# refuse writes with ENOSPC; fio's verify job stays below 8 MiB.
	head -c 16777216 /dev/urandom >"$WORK/n.img"
	n=$(add_disk "$G" xvdb "fault:eio@sector=16384-16391,enospc@write-sector=20480-20487:$WORK/n.img")
	fio_job "$WORK/verify.fio" 4m "offset=0" "loops=2"
	cat >"$WORK/bad.fio" <<FIO
[global]
ioengine=nbd
uri=\${NBDURI}
bs=4k
size=4k
[read-eio]
rw=read
offset=8m
[write-enospc]
stonewall
rw=write
offset=10m
[read-near]
stonewall
rw=read
offset=8188k
FIO
	cat >"$WORK/inner.sh" <<EOS
fio --output-format=json --output='$WORK/verify.json' '$WORK/verify.fio' &
v=\$!
i=0
while [ \$i -lt 3 ]; do
	i=\$((i + 1))
	fio --output-format=json --output='$WORK/bad.'\$i'.json' '$WORK/bad.fio'
	echo "bad run \$i: status \$?"
done
wait \$v || exit 1
EOS
	nbd_run "$G" xvdb "NBDURI=\"\$uri\" sh '$WORK/inner.sh'" >"$WORK/inner.out" 2>&1 ||
		{ cat "$WORK/inner.out" "$WORK/verify.json"; bk_fail "verify fio next to the faults failed"; }
	fio_ok "$WORK/verify.json" || { cat "$WORK/verify.json"; bk_fail "verify fio reports errors"; }
	echo "ok: fio verify=crc32c next to failing requests: 0 errors"
	grep -c "status 0" "$WORK/inner.out" | grep -qx 0 || { cat "$WORK/inner.out"; bk_fail "fio on the faulted sectors succeeded"; }
	python3 - "$WORK"/bad.*.json <<'PY' || bk_fail "fio did not see EIO on exactly the faulted sectors"
import json, sys
for name in sys.argv[1:]:
    t = open(name).read()
    jobs = {j["jobname"]: j for j in json.loads(t[t.index("{"):])["jobs"]}
    # EIO for the faulted read and write (blkif has no ENOSPC), none next door.
    assert jobs["read-eio"]["error"] == 5, (name, jobs["read-eio"]["error"])
    assert jobs["write-enospc"]["error"] == 5, (name, jobs["write-enospc"]["error"])
    assert jobs["read-near"]["error"] == 0, (name, jobs["read-near"]["error"])
print("ok: fio saw EIO on the faulted read and write, 3 times each, and read next to them fine")
PY
	grep -q "vbd/$G/$n\( queue [0-9]*\)\?: I/O error on op 0 sector 16384: Input/output error" "$LOG" || bk_fail "no log line for the read EIO"
	grep -q "vbd/$G/$n\( queue [0-9]*\)\?: I/O error on op 1 sector 20480: No space left on device" "$LOG" || bk_fail "no log line for ENOSPC"

	# A full disk: writes after the first 300 fail; what was written still reads back.
	head -c 16777216 /dev/urandom >"$WORK/s.img"
	s=$(add_disk "$G" xvdc "fault:enospc@write-after=300:$WORK/s.img")
	fio_job "$WORK/full.fio" 4m
	fio_nbd "$G" xvdc "$WORK/full.json" "$WORK/full.fio" && bk_fail "fio wrote 1024 blocks to a disk that fails after 300"
	python3 - "$WORK/full.json" <<'PY' || bk_fail "fio on a full disk did not end with EIO"
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
assert j["error"] == 5, j["error"]
print("ok: full disk: fio stopped with EIO after", j["write"]["io_kbytes"] // 4, "writes")
PY
	cmp -n 4194304 "$WORK/s.img" /dev/zero >/dev/null 2>&1 && bk_fail "nothing was written before ENOSPC"
	nbd_run "$G" xvdc "nbdcopy \"\$uri\" '$WORK/s.copy'" || bk_fail "reading the full disk failed"
	cmp "$WORK/s.img" "$WORK/s.copy" || bk_fail "the full disk reads back differently from its file"
	echo "ok: full disk still reads back exactly"
	grep -q "vbd/$G/$s\( queue [0-9]*\)\?: I/O error on op 1 .*No space left on device" "$LOG" || bk_fail "no ENOSPC log line"
else
	echo "nbdkit/fio with ioengine=nbd not available: fio part skipped"
fi
back_alive
bk_done
