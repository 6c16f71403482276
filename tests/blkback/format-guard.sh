#!/bin/sh
# xbd-back: a disk image of a known format (qcow2, VHD, VHDX, VMDK, QED,
# VDI) given as a raw file is refused, read-only too, with a line naming
# the format and what to do, and no other line about it; format-check = 0
# serves it raw; an empty file is refused alike; a LUKS header is served
# with a warning.
. "$top_srcdir/tests/blkback/common.sh"
command -v qemu-img >/dev/null || skip "no qemu-img (qemu-utils)"

dom=$(new_domain)
for f in qcow2:b vpc:c vhdx:d vmdk:e qed:f vdi:g; do
	fmt=${f%%:*}
	qemu-img create -q -f "$fmt" "$WORK/i.$fmt" 16M || fail "qemu-img create -f $fmt"
	mode=w
	[ "$fmt" = vmdk ] && mode=r # a read-only disk is refused alike
	eval "dev_$fmt=\$(add_disk $dom xvd${f#*:} $WORK/i.$fmt --mode $mode)"
done
: >"$WORK/empty.img"
e=$(add_disk "$dom" xvdz "$WORK/empty.img")
qemu-img create -q -f qcow2 "$WORK/forced.qcow2" 16M
forced=$(add_disk "$dom" xvdy "$WORK/forced.qcow2")
printf 'LUKS\272\276\0\1' >"$WORK/luks.img"
truncate -s 16M "$WORK/luks.img"
luks=$(add_disk "$dom" xvdx "$WORK/luks.img")
cat >"$WORK/conf" <<CONF
[disk $WORK/forced.qcow2]
format-check = 0
CONF
start_back --config "$WORK/conf"
wait_state "$dom" "$forced" 2
wait_state "$dom" "$luks" 2
[ "$(bkey "$dom" "$forced" sectors)" = $(($(stat -c %s "$WORK/forced.qcow2") / 512)) ] || bk_fail "format-check = 0 did not serve the qcow2 file raw"
for f in qcow2:qcow2 vpc:VHD vhdx:VHDX vmdk:VMDK qed:QED vdi:VDI; do
	fmt=${f%%:*} name=${f#*:}
	eval "d=\$dev_$fmt"
	sim_wait_for 10 grep -q "vbd/$dom/$d: .*i.$fmt' is a $name image" "$LOG" ||
		bk_fail "no line refusing the $name image"
	# Every line about it is that line (how often an open is retried is lifecycle.c's).
	grep "i.$fmt" "$LOG" | grep -v "i.$fmt' is a $name image" >"$WORK/lines"
	[ -s "$WORK/lines" ] && { cat "$WORK/lines"; bk_fail "another line about the $name image"; }
	grep "i.$fmt' is a $name image" "$LOG" | grep -q "format-check = 0" ||
		bk_fail "the $name line does not say what to do"
	bkey "$dom" "$d" sectors >/dev/null 2>&1 && bk_fail "the $name image was advertised"
done
sim_wait_for 10 grep -q "vbd/$dom/$e: .*empty.img' is empty" "$LOG" || bk_fail "no line refusing the empty file"
grep "empty.img" "$LOG" | grep -v "empty.img' is empty" | grep . && bk_fail "another line about the empty file"
bkey "$dom" "$e" sectors >/dev/null 2>&1 && bk_fail "the empty file was advertised"
grep -q "vbd/$dom/$luks: .*luks.img' starts with a LUKS header" "$LOG" || bk_fail "no warning about the LUKS header"
bk_done
