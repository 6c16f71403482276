#!/bin/sh
# Incremental backups across crashes: between two checkpoints a guest
# writes (fio randwrite with verify through `nbdkit xbd`) and, at a random
# instant of its writes, xbd-back is killed with SIGKILL and started again
# (odd rounds) or the guest's worker is (even rounds: the supervisor
# starts another); then the guest is paused, its image copied, the next
# checkpoint made with its view, and the guest goes on.  Each round's
# incremental (the extents `xbdctl changes` lists, read from the new
# checkpoint's view while the guest writes again) applied to the previous
# round's image must give this round's image, and the guest's verify must
# pass.  Prints each round's changed, reported and over-reported blocks.
# CBT_CRASH_ROUNDS rounds (3; make check-backup-long runs 20).
. "$top_srcdir/tests/backup/lib.sh"
need_backup
ROUNDS=${CBT_CRASH_ROUNDS:-3}

pick() {
	echo $(( $(od -An -N2 -tu2 /dev/urandom) % $1 ))
}

G=$(new_domain)
new_disk "$WORK/g.img" 32M
dd if=/dev/urandom of="$WORK/g.img" bs=1M count=32 conv=notrunc status=none
gd=$(add_disk "$G" xvdb "$WORK/g.img")
start_cbt --disk "$WORK/g.img:cbt=1,cbt-scratch=33554432"
wait_state "$G" "$gd" 2
D=$(dev_of "$G" "$gd")
cp "$WORK/g.img" "$WORK/p0.img"
ctl checkpoint "$D" c0 >/dev/null || bk_fail "checkpoint c0 failed"

over_all=0
i=0
while [ "$i" -lt "$ROUNDS" ]; do
	i=$((i + 1))
	prev=$((i - 1))
	base=$(writes "$D")
	# 2048 writes at 750 a second: 2.7 s, so that the kill, up to 0.9 s after the
	# writes are seen going (a poll through xbdctl, slow on a busy host), finds the
	# guest still writing (at 1500, 1.4 s, its worker was gone 3 times in 5 runs of 20).
	fio_job "$WORK/r$i.fio" 8m "offset=$(( (i % 3) * 8 ))m" iodepth=8 rate_iops=750
	fio_nbd "$G" xvdb "$WORK/r$i.json" "$WORK/r$i.fio" >"$WORK/r$i.out" 2>&1 &
	gpid=$!
	sim_wait_for 20 writing "$D" $((base + 100)) || bk_fail "round $i: the guest did not write"
	at="0.$(pick 10)"
	sleep "$at"
	if [ $((i % 2)) = 1 ]; then
		what="kill -9 of xbd-back"
		kill -KILL "$BACK_PID"
		wait "$BACK_PID" 2>/dev/null
		sleep "0.$(pick 4)"
		start_cbt --disk "$WORK/g.img:cbt=1,cbt-scratch=33554432"
	else
		what="kill -9 of its worker"
		w=$(pgrep -P "$BACK_PID" -f -- "--worker" | head -1)
		[ -n "$w" ] || bk_fail "round $i: no worker to kill"
		kill -KILL "$w"
	fi
	sleep "0.$(pick 6)"
	guest_pause "$gpid" "$G" "$gd"
	cp "$WORK/g.img" "$WORK/p$i.img"
	ctl checkpoint "$D" "c$i" --view >"$WORK/c$i.out" ||
		{ cat "$WORK/c$i.out"; bk_fail "round $i: checkpoint c$i failed"; }
	guest_resume
	ctl changes "$D" "c$prev" "c$i" --json >"$WORK/ch$i.json" ||
		bk_fail "round $i: changes failed: $(cat "$WORK/ch$i.json")"
	r=$(covers "$WORK/ch$i.json" "$WORK/p$prev.img" "$WORK/p$i.img") ||
		bk_fail "round $i ($what): a block the guest wrote is missing from the tracking"
	cp "$WORK/p$prev.img" "$WORK/restore.img"
	inc=$(incremental "$(view_file "$WORK/c$i.out")" "c$i" "$WORK/ch$i.json" "$WORK/restore.img") ||
		bk_fail "round $i: the incremental from c$i's view failed"
	cmp "$WORK/restore.img" "$WORK/p$i.img" >/dev/null ||
		bk_fail "round $i ($what): the restore (c$prev + incremental) is not the disk at c$i"
	ctl release "$D" "c$i" >/dev/null || bk_fail "round $i: release failed"
	ctl drop "$D" "c$prev" >/dev/null || bk_fail "round $i: drop c$prev failed"
	wait "$gpid" && fio_ok "$WORK/r$i.json" ||
		{ cat "$WORK/r$i.out" "$WORK/r$i.json" >&2; bk_fail "round $i: the guest's fio verify failed"; }
	set -- $r
	over_all=$((over_all + $3))
	echo "round $i: $what after ${at}s of writes: $1 blocks of 64 KiB changed, $2 reported," \
		"$3 over-reported; incremental $(echo "$inc" | cut -d' ' -f1) extents," \
		"$(echo "$inc" | cut -d' ' -f2) bytes; the restore is the disk"
	rm -f "$WORK/p$prev.img"
done
echo "ok: $ROUNDS rounds, every restore equal to the disk; $over_all blocks over-reported in all"
bk_done
