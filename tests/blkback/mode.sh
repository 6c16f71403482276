#!/bin/sh
# xbd-back: the toolstack's mode decides whether a disk is writable, and
# only a mode containing 'w' makes it so (what Linux blkback and QEMU do):
# "w", "rw" and "w!" (Xen's forced mode: shared) serve it read-write;
# "r", "ro", a missing mode and a value we do not know ("readonly") serve
# it read-only, the unknown value and the missing mode with a warning
# naming them.  A read-only disk says so in
# info and refuses writes.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
MODES="w rw w! r ro readonly none wr"
i=0
for mode in $MODES; do
	i=$((i + 1))
	new_disk "$WORK/d$i.img" 1M
	dev=$(add_disk "$dom" "$((4000 + i))" "$WORK/d$i.img")
	be=/local/domain/0/backend/vbd/$dom/$dev
	# What an administrator's toolstack wrote, before xbd-back sees the disk.
	if [ "$mode" = none ]; then xs rm "$be/mode"; else xs write "$be/mode" "$mode"; fi
done
start_back
i=0
for mode in $MODES; do
	i=$((i + 1))
	dev=$((4000 + i))
	be=/local/domain/0/backend/vbd/$dom/$dev
	wait_state "$dom" "$dev" 2
	case $mode in *w*) sc=rw ;; *) sc=readonly ;; esac
	front "$dom" --dev "$dev" "$sc" >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "mode '$mode': $sc failed"; }
	info=$(xs read "$be/info")
	if [ "$sc" = readonly ]; then
		[ $((info & 4)) = 4 ] || bk_fail "mode '$mode': info $info does not say read-only"
	else
		[ $((info & 4)) = 0 ] || bk_fail "mode '$mode': info $info says read-only"
	fi
	case $mode in
	readonly|wr) grep -q "vbd/$dom/$dev: mode '$mode' is not r, ro, w, rw, w! or rw!: serving it" "$LOG" ||
		bk_fail "no warning naming mode '$mode'" ;;
	none) grep -q "vbd/$dom/$dev: no mode in the backend directory: serving it read-only" "$LOG" ||
		bk_fail "no warning for the missing mode" ;;
	*) grep -q "vbd/$dom/$dev: .*mode" "$LOG" && bk_fail "a warning for mode '$mode'" ;;
	esac
	echo "mode '$mode': served $sc"
done
bk_done
