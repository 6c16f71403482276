#!/bin/sh
# The nbdkit plugin serves the vbd over NBD: nbdinfo shows its size, fio
# (ioengine=nbd, verify=crc32c; also four connections at once) passes, and
# what the NBD client wrote is what the backing file holds (qemu-img
# compare), also after qemu-img convert and nbdcopy.
. "$top_srcdir/tests/blkfront/front-lib.sh"
need_nbdkit
command -v nbdinfo >/dev/null || skip "nbdinfo is not installed"
front_setup --discard-enable 1

nbd() {
	# nbdkit in the foreground on a private unix socket, running "$@" as its client
	# (the ASan preload is for nbdkit only: qemu-img's coroutines hang under it)
	"$ASDOM" "$DOMU" env $NBDKIT_PRELOAD nbdkit -f -U - "$PLUGIN" vdev=xvdb \
		--run "env -u LD_PRELOAD -u ASAN_OPTIONS $*"
}

info=$(nbd 'nbdinfo --json "$uri"') || bk_fail "nbdinfo through nbdkit failed"
echo "$info" | head -c 2000
echo "$info" | python3 -c '
import json, sys
r = json.load(sys.stdin)
e = r["exports"][0]
assert e["export-size"] == 16 * 1024 * 1024, e["export-size"]
assert e["can_flush"] and e["can_fua"] and e["can_multi_conn"], e
' || bk_fail "nbdinfo does not show a 16 MiB writable export with flush/FUA/multi-conn"

if command -v fio >/dev/null && fio --enghelp 2>/dev/null | grep -qw nbd; then
	cat >"$WORK/verify.fio" <<FIO
[global]
ioengine=nbd
uri=\${NBDURI}
rw=randwrite
bs=4k
size=4m
iodepth=8
verify=crc32c
verify_fatal=1
do_verify=1
verify_state_save=0
[job]
FIO
	out=$(nbd 'NBDURI="$uri" fio --output-format=terse '"$WORK/verify.fio") ||
		bk_fail "fio ioengine=nbd verify=crc32c failed: $out"
	echo "fio ok: $(echo "$out" | cut -d';' -f1-8)"
	# four connections at once (multi-conn), mixed sizes, nbdkit's parallel threads
	cat >"$WORK/multi.fio" <<FIO
[global]
ioengine=nbd
uri=\${NBDURI}
rw=randrw
bsrange=512-256k
size=3m
iodepth=16
verify=crc32c
verify_fatal=1
do_verify=1
verify_state_save=0
[a]
offset=0
[b]
offset=4m
[c]
offset=8m
[d]
offset=12m
FIO
	out=$(nbd 'NBDURI="$uri" fio --output-format=terse '"$WORK/multi.fio") ||
		bk_fail "fio with 4 connections, verify=crc32c failed: $out"
	echo "fio multi-conn ok"
else
	echo "fio with ioengine=nbd not available: fio part skipped"
fi

if command -v qemu-img >/dev/null; then
	# the export and the backing file must hold the same bytes
	nbd 'qemu-img compare -f raw -F raw "$uri" '"$DISK" ||
		bk_fail "qemu-img compare: export differs from the backing file"
	head -c 1048576 /dev/urandom >"$WORK/src.img"
	truncate -s 16M "$WORK/src.img"
	nbd 'qemu-img convert -n -f raw -O raw '"$WORK/src.img"' "$uri"' ||
		bk_fail "qemu-img convert onto the export failed"
	cmp "$WORK/src.img" "$DISK" || bk_fail "backing file differs after qemu-img convert"
fi
if command -v nbdcopy >/dev/null; then
	nbd 'nbdcopy "$uri" '"$WORK/copy.img" || bk_fail "nbdcopy from the export failed"
	cmp "$WORK/copy.img" "$DISK" || bk_fail "nbdcopy result differs from the backing file"
fi
exit 0
