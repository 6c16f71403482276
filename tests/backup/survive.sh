#!/bin/sh
# No block the guest wrote goes missing from the changed-block tracking,
# whatever happens between two checkpoints.  For each event, on a disk of
# its own: checkpoint c0 (the image copied as it is then), a guest writing
# (fio randwrite with verify, through `nbdkit xbd`), the event in the
# middle of its writes, then checkpoint c1 (the image copied again); every
# 64 KiB block the two copies differ in must be in `xbdctl changes c0 c1`
# (a gap fails), and the blocks reported but unchanged are printed: the
# over-report.  The events:
#   sigterm     xbd-back stopped with SIGTERM and started again
#   kill9       xbd-back killed (SIGKILL) and started again
#   worker      the guest's worker killed (SIGKILL): the supervisor starts another
#   reconnect   the guest's frontend closes the disk and connects again
#   reboot      the guest's domain destroyed in the middle of its writes, and a
#               new one made with the same image (what xl reboot does to a disk)
#   powerloss   the host loses power (test hooks): xbd-back and the guest
#               killed, the journals gone (tmpfs), the tracking file put
#               back as its last sync left it (the page cache lost), the
#               next boot another boot; the disk image keeps every write
#               that completed (the worst case for the tracking)
# A guest that lives through the event passes its fio verify.
. "$top_srcdir/tests/backup/lib.sh"
need_backup
EVENTS=${SURVIVE_EVENTS:-sigterm kill9 worker reconnect reboot powerloss}
hooks=yes
grep -q XBD_TEST_CRASH "$XBD_BACK" || hooks=no

# the back's options: a [disk] rule per image (every image of this test is WORK/*.img)
RULE="$WORK/*.img:cbt=1"
export XBD_TEST_BOOT_ID=boot-1

# pick N: a random number from 0 to N-1
pick() {
	echo $(( $(od -An -N2 -tu2 /dev/urandom) % $1 ))
}

# guest DOMID DEVID OUT OFFSET: a 12 MiB fio randwrite job at about 1500 writes a
# second, in the background, once it has written 200 times; GUEST_PID
guest() {
	_base=$(writes "vbd/$1/$2")
	fio_job "$WORK/$3.fio" 12m "offset=$4" iodepth=8 rate_iops=1500
	fio_nbd "$1" xvdb "$WORK/$3.json" "$WORK/$3.fio" >"$WORK/$3.out" 2>&1 &
	GUEST_PID=$!
	sim_wait_for 20 writing "vbd/$1/$2" $((_base + 200)) ||
		{ cat "$WORK/$3.out"; bk_fail "$3: the guest's fio did not start writing"; }
}

guest_ok() {
	wait "$GUEST_PID" && fio_ok "$WORK/$1.json" ||
		{ cat "$WORK/$1.out" "$WORK/$1.json" >&2; bk_fail "$1: the guest's fio verify failed"; }
}

guest_kill() {
	for p in $(_bk_tree "$GUEST_PID"); do kill -KILL "$p" 2>/dev/null; done
	wait "$GUEST_PID" 2>/dev/null
}

# shadow_restore FILE: the tracking file as its last sync left it (test builds keep
# it after the file: cbt.c's xbd_cbt_file_sync)
shadow_restore() {
	python3 - "$1" <<'PY'
import os, struct, sys
p = sys.argv[1]
total = os.path.getsize(p)
main = (total - 4096) // 3
with open(p, "r+b") as f:
    f.seek(main)
    which = struct.unpack("<Q", f.read(8))[0]
    if which not in (1, 2):
        sys.exit("no synced copy in the shadow")
    f.seek(main + 4096 + (which - 1) * main)
    data = f.read(main)
    f.seek(0)
    f.write(data)
PY
}

back_args() {
	if [ "$1" = powerloss ]; then
		echo "--workers 0 --disk $RULE"
	else
		echo "--disk $RULE"
	fi
}

for ev in $EVENTS; do
	if [ "$ev" = powerloss ] && [ $hooks = no ]; then
		echo "powerloss: SKIP (xbd-back built without --enable-test-hooks)"
		continue
	fi
	# (zones of 1 MiB: a power loss then reports the zones written last, not the whole disk)
	[ "$ev" = powerloss ] && export XBD_TEST_CBT_SHADOW=1 XBD_TEST_CBT_ZONE_BYTES=1048576
	dom=$(new_domain)
	new_disk "$WORK/$ev.img" 32M
	dd if=/dev/urandom of="$WORK/$ev.img" bs=1M count=32 conv=notrunc status=none
	d=$(add_disk "$dom" xvdb "$WORK/$ev.img")
	# shellcheck disable=SC2046 # options, one word each
	start_cbt $(back_args "$ev")
	wait_state "$dom" "$d" 2
	cp "$WORK/$ev.img" "$WORK/$ev.c0"
	ctl checkpoint "$(dev_of "$dom" "$d")" c0 >/dev/null || bk_fail "$ev: checkpoint c0 failed"
	guest "$dom" "$d" "$ev-1" 0
	# a random instant of its writes (it writes for about 2 s)
	sleep "0.$(pick 9)"
	case $ev in
	sigterm)
		stop_back || bk_fail "sigterm: xbd-back exited with status $?"
		start_cbt $(back_args "$ev")
		guest_ok "$ev-1" ;;
	kill9)
		kill -KILL "$BACK_PID"
		wait "$BACK_PID" 2>/dev/null
		start_cbt $(back_args "$ev")
		guest_ok "$ev-1" ;;
	worker)
		w=$(pgrep -P "$BACK_PID" -f -- "--worker" | head -1)
		[ -n "$w" ] || bk_fail "worker: no worker to kill"
		kill -KILL "$w"
		guest_ok "$ev-1" ;;
	reconnect)
		guest_ok "$ev-1"
		guest "$dom" "$d" "$ev-2" 16m
		guest_ok "$ev-2" ;;
	reboot)
		"$XBD_SIM" domain destroy "$SIMDIR" "$dom" || bk_fail "reboot: cannot destroy the domain"
		guest_kill
		dom=$(new_domain)
		d=$(add_disk "$dom" xvdb "$WORK/$ev.img")
		wait_state "$dom" "$d" 2
		guest "$dom" "$d" "$ev-2" 16m
		guest_ok "$ev-2" ;;
	powerloss)
		kill -KILL "$BACK_PID"
		wait "$BACK_PID" 2>/dev/null
		BACK_PID=
		guest_kill
		"$XBD_SIM" domain destroy "$SIMDIR" "$dom" || bk_fail "powerloss: cannot destroy the domain"
		rm -rf "$SIMDIR"/run/xbd-journal.*
		f=$(ls "$WORK"/cbt/*"$ev.img"*.cbt)
		shadow_restore "$f" || bk_fail "powerloss: cannot put the tracking file back as synced"
		export XBD_TEST_BOOT_ID=boot-2
		unset XBD_TEST_CBT_SHADOW XBD_TEST_CBT_ZONE_BYTES
		dom=$(new_domain)
		d=$(add_disk "$dom" xvdb "$WORK/$ev.img")
		start_cbt $(back_args "$ev")
		wait_state "$dom" "$d" 2 ;;
	esac
	cp "$WORK/$ev.img" "$WORK/$ev.c1"
	ctl checkpoint "$(dev_of "$dom" "$d")" c1 >/dev/null || { tail "$LOG"; bk_fail "$ev: checkpoint c1 failed"; }
	ctl changes "$(dev_of "$dom" "$d")" c0 c1 --json >"$WORK/$ev.changes" ||
		bk_fail "$ev: changes c0 c1 failed: $(cat "$WORK/$ev.changes")"
	r=$(covers "$WORK/$ev.changes" "$WORK/$ev.c0" "$WORK/$ev.c1") ||
		bk_fail "$ev: a block the guest wrote is missing from the tracking"
	set -- $r
	echo "$ev: $1 blocks of 64 KiB changed, $2 reported, $3 over-reported"
	stop_back || bk_fail "$ev: xbd-back exited with status $? after SIGTERM"
	export XBD_TEST_BOOT_ID=boot-1
done
grep -q "the host went down while it was in use" "$LOG" || [ $hooks = no ] ||
	! echo " $EVENTS " | grep -q ' powerloss ' || bk_fail "powerloss: the recovery was not logged"
bk_done
