#!/bin/sh
# xbd-back: a frontend that writes nonsense to its xenstore directory (an
# unknown protocol, a ring-page-order above the maximum, too many queues, a
# ring-ref it never granted, a second queue without keys) gets its device closed with a log line saying
# why; the daemon keeps serving, and the device recovers when the
# frontend starts over properly.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
start_back
fe=/local/domain/$dom/device/vbd
i=0
while IFS='|' read -r keys reason; do
	i=$((i + 1))
	new_disk "$WORK/d$i.img" 1M
	dev=$(add_disk "$dom" "$((3000 + i))" "$WORK/d$i.img")
	wait_state "$dom" "$dev" 2
	# shellcheck disable=SC2086
	"$ASDOM" "$dom" xenstore-write $(echo "$keys" | sed "s|\([a-z0-9/-]*\)=\([^ ]*\)|$fe/$dev/\1 \2|g") \
		"$fe/$dev/state" 3 || fail "cannot write the frontend keys"
	wait_state "$dom" "$dev" 5
	grep -q "vbd/$dom/$dev: $reason" "$LOG" || bk_fail "no log line '$reason' for $keys"
done <<EOS
ring-ref=8 event-channel=1 protocol=x86_99-abi|unknown protocol 'x86_99-abi'
ring-page-order=9 ring-ref0=8 event-channel=1|bad ring-page-order
multi-queue-num-queues=99 ring-ref=8 event-channel=1|bad multi-queue-num-queues
ring-ref=999999 event-channel=1|cannot map the ring
multi-queue-num-queues=2 queue-0/ring-ref=8 queue-0/event-channel=1|cannot read .*queue-1/ring-ref
ring-ref=abc event-channel=1|cannot read .*/ring-ref
EOS
kill -0 "$BACK_PID" || bk_fail "xbd-back died"
# The last device starts over: Closed, Initialising, then a real connect.
"$ASDOM" "$dom" xenstore-write "$fe/$dev/state" 6
wait_state "$dom" "$dev" 6
"$ASDOM" "$dom" xenstore-rm "$fe/$dev/ring-ref" "$fe/$dev/event-channel"
front "$dom" --dev "$dev" rw >"$WORK/out" 2>&1 || { cat "$WORK/out"; bk_fail "recovery after bad keys failed"; }
bk_done
