#!/bin/sh
# Hostile guest next to an innocent one: while domain V runs fio with
# verify=crc32c on its disk through `nbdkit xbd` (the whole time), domain H
# breaks every rule on the same xbd-back: each request-validation rule
# (rawfront's scenarios), grants it does not own / to another domain /
# read-only for a read, revoked while in flight, indirect pages out of
# range, req_prod going backwards or jumping past the ring, a notification
# flood, a frontend that never consumes responses, random garbage, and
# absurd xenstore values.  Each bad request must fail (or its device be
# disconnected) with a log line saying why; V's fio must pass every verify
# with 0 errors, and xbd-back must still be running at the end.
. "$top_srcdir/tests/robust/lib.sh"
need_fio_nbd
bk_need tests/robust/evilfront

V=$(new_domain)
H=$(new_domain)
head -c 16777216 /dev/urandom >"$WORK/v.img"
add_disk "$V" xvdb "$WORK/v.img" >/dev/null
start_back
victim_start v "$V" xvdb

# One disk per group, so that no group reaches the per-device log rate limit.
hdisk() {
	truncate -s 16M "$WORK/h$1.img"
	add_disk "$H" "$((4000 + $1))" "$WORK/h$1.img"
}
run_sc() { # DEV SCENARIO [rawfront options]
	_dev=$1 _sc=$2
	shift 2
	front "$H" --dev "$_dev" "$@" "$_sc" >"$WORK/sc.txt" 2>&1 ||
		{ cat "$WORK/sc.txt"; bk_fail "hostile scenario $_sc was not handled"; }
	echo "ok: $_sc $*"
}
evil_sc() { # DEV SCENARIO
	evil "$H" --dev "$1" "$2" >"$WORK/sc.txt" 2>&1 ||
		{ cat "$WORK/sc.txt"; bk_fail "hostile scenario $2 was not handled"; }
	grep "evilfront: .*\(revoke-inflight:\|went to\|: ok\)" "$WORK/sc.txt"
}
logged() { # PATTERN: xbd-back logged it
	grep -q "xbd-back: vbd/$H/[0-9]*: .*$1" "$LOG" || bk_fail "no log line for: $1"
}

d=$(hdisk 1)
for sc in bad-op nseg0 nseg12 first-gt-last last8; do run_sc "$d" "$sc"; done
d=$(hdisk 2)
for sc in beyond-end overflow indirect-too-many; do run_sc "$d" "$sc"; done
for r in "unknown operation" "bad segment count" "first_sect > last_sect" "beyond end of disk" \
	"more indirect segments than advertised" "indirect request wraps"; do
	logged "request refused: .*$r"
done
d=$(hdisk 3)
for sc in gref-bad gref-other gref-ro; do run_sc "$d" "$sc"; done
run_sc "$d" gref-ro --persistent 0
logged "request refused: grant [0-9]* not usable"
d=$(hdisk 4)
evil_sc "$d" revoke-inflight
evil_sc "$d" indirect-bad-page
evil_sc "$d" indirect-unaligned
d=$(hdisk 5)
run_sc "$d" garbage
run_sc "$d" garbage --abi x86_32-abi
d=$(hdisk 6)
run_sc "$d" flood --secs 1
d=$(hdisk 7)
run_sc "$d" noconsume
d=$(hdisk 8)
run_sc "$d" ring-overflow
logged "frontend corrupted the ring"
d=$(hdisk 9)
evil_sc "$d" req-prod-backwards
logged "frontend corrupted the ring"
st=$(bstate "$H" "$d")
[ "$st" = 5 ] || [ "$st" = 6 ] || bk_fail "device with req_prod going backwards is in state $st, not Closing/Closed"

# Absurd xenstore values: the device closes with a reason, nothing else happens.
fe=/local/domain/$H/device/vbd
i=10
while IFS='|' read -r keys reason; do
	i=$((i + 1))
	dev=$(hdisk $i)
	wait_state "$H" "$dev" 2
	# shellcheck disable=SC2086
	"$ASDOM" "$H" xenstore-write -- $(echo "$keys" | sed "s|\([a-z0-9/-]*\)=\([^ ]*\)|$fe/$dev/\1 \2|g") \
		"$fe/$dev/state" 3 || fail "cannot write the frontend keys $keys"
	wait_state "$H" "$dev" 5
	grep -q "vbd/$H/$dev: $reason" "$LOG" || bk_fail "no log line '$reason' for $keys"
	echo "ok: $keys"
done <<EOS
ring-page-order=30 ring-ref0=8 event-channel=1|bad ring-page-order
ring-page-order=-1 ring-ref0=8 event-channel=1|bad ring-page-order
num-ring-pages=1073741824 ring-ref0=8 event-channel=1|bad num-ring-pages
num-ring-pages=3 ring-ref0=8 event-channel=1|num-ring-pages 3 is not a power of two
multi-queue-num-queues=10000 ring-ref=8 event-channel=1|bad multi-queue-num-queues
multi-queue-num-queues=0 ring-ref=8 event-channel=1|bad multi-queue-num-queues
ring-ref=8 event-channel=-1|cannot read .*/event-channel
ring-ref=8 event-channel=abc|cannot read .*/event-channel
ring-ref=8 event-channel=4294967295|cannot read .*/event-channel
ring-ref=8 event-channel=99999999999999999999999|cannot read .*/event-channel
ring-ref=-1 event-channel=1|cannot read .*/ring-ref
ring-ref=8 event-channel=1 protocol=x86_64-abi;rm|unknown protocol
EOS

back_alive
victim_stop v
# The victim's disk was never disturbed: no log line about it but its connect.
grep "vbd/$V/" "$LOG" | grep -v "connected\|opened\|new device\|state\|disconnected" &&
	bk_fail "xbd-back logged something about the innocent guest's disk"
bk_done
