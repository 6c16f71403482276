#!/bin/sh
# xbd-back's RBD engine (params rbd:POOL/IMAGE[@SNAP][:KEY=VALUE...]) on a
# throwaway one-node memstore Ceph cluster (tests/lib/ceph-cluster.sh):
# data reads back and reaches the cluster, 64 KiB discard granularity,
# two rings on one image handle, online resize through librbd's update
# watch (no SIGHUP), a snapshot served read-only, and clear refusals.
. "$top_srcdir/tests/blkback/common.sh"
ceph_cluster 536870912
rbd create --size 64M rbd/img || fail "rbd create"

dom=$(new_domain)
start_back --max-queues 2
sim_wait_for 5 test -S "$SIMDIR/xbd-back.0.sock" || bk_fail "xbd-back did not start"
P=":conf=$CEPH_CONF"

# The data path, and what the disk offers.
a=$(add_disk "$dom" xvdb "rbd:rbd/img$P")
wait_state "$dom" "$a" 2
# InitWait comes before the image opens (a remote open runs on a thread of its own): sectors after.
sectors_are() { [ "$(bkey "$dom" "$1" sectors 2>/dev/null)" = "$2" ]; }
sim_wait_for 20 sectors_are "$a" 131072 || bk_fail "64M image is $(bkey "$dom" "$a" sectors) sectors"
[ "$(bkey "$dom" "$a" feature-discard)" = 1 ] || bk_fail "no discard"
[ "$(bkey "$dom" "$a" discard-granularity)" = 65536 ] || bk_fail "discard-granularity $(bkey "$dom" "$a" discard-granularity)"
[ "$(bkey "$dom" "$a" discard-secure)" = 0 ] || bk_fail "secure discard offered"
[ "$(bkey "$dom" "$a" multi-queue-max-queues)" = 2 ] || bk_fail "queues $(bkey "$dom" "$a" multi-queue-max-queues)"
for sc in rw flush discard indirect; do
	front_ok "$dom" "$a" "$sc"
done
rbd diff rbd/img | grep -q "data" || bk_fail "no data in the image after the writes"
# Two rings of one disk share the image handle (one exclusive lock owner).
"$XBD_SIM" disk remove "$SIMDIR" "$dom" "$a" --timeout 5 || bk_fail "detach of $a"
rbd create --size 32M rbd/img2 || fail "rbd create img2"
b=$(add_disk "$dom" xvdc "rbd:rbd/img2$P" --discard-enable 0)
wait_state "$dom" "$b" 2
front_ok "$dom" "$b" --queues 2 --qd 32 --secs 2 stress
grep -q "stress: .* on 2 queue(s), all verified" "$WORK/out" || bk_fail "stress on 2 queues"
[ "$(rbd status rbd/img2 | grep -c "watcher=")" = 1 ] || { rbd status rbd/img2; bk_fail "not one watcher (one handle) for two rings"; }

# Online resize: librbd's update watch, no SIGHUP.
front "$dom" --dev "$b" connect >>"$WORK/out" 2>&1 || bk_fail "connect"
rbd resize --size 48M rbd/img2 || fail "rbd resize"
i=0
while [ "$(bkey "$dom" "$b" sectors)" != 98304 ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ "$(bkey "$dom" "$b" sectors)" = 98304 ] || bk_fail "rbd resize to 48M: sectors $(bkey "$dom" "$b" sectors)"
grep -q "resized: 65536 -> 98304 sectors" "$LOG" || bk_fail "no resize log line"

# A snapshot is served read-only, whatever the mode.
rbd snap create rbd/img@s1 || fail "rbd snap create"
c=$(add_disk "$dom" xvdd "rbd:rbd/img@s1$P")
wait_state "$dom" "$c" 2
[ $(($(bkey "$dom" "$c" info) & 4)) = 4 ] || bk_fail "snapshot not VDISK_READONLY (info $(bkey "$dom" "$c" info))"
[ "$(bkey "$dom" "$c" feature-discard)" = 0 ] || bk_fail "discard offered on a snapshot"
front_ok "$dom" "$c" readonly
grep -q "img@s1.* can only be read: served read-only" "$LOG" || bk_fail "no log line for the snapshot"

# Refusals: a secret in params, a missing image, a missing pool, bad syntax.
add_disk "$dom" xvde "rbd:rbd/img:key=AQBsecretsecret==$P" >/dev/null
add_disk "$dom" xvdf "rbd:rbd/nosuch$P" >/dev/null
add_disk "$dom" xvdg "rbd:nopool/img$P" >/dev/null
add_disk "$dom" xvdh "rbd:justanimage" >/dev/null
sim_wait_for 15 grep -q "rbd:rbd/img: key= would put the secret" "$LOG" || bk_fail "key= not refused"
grep -q "AQBsecret" "$LOG" && bk_fail "the secret reached the log"
sim_wait_for 15 grep -q "rbd:rbd/nosuch: cannot open the image: No such file" "$LOG" ||
	bk_fail "no message for a missing image"
sim_wait_for 15 grep -q "rbd:nopool/img: no pool 'nopool'" "$LOG" || bk_fail "no message for a missing pool"
sim_wait_for 5 grep -q "rbd:justanimage: not rbd:POOL" "$LOG" || bk_fail "no message for bad syntax"
# A monitor that does not answer: one line after client_mount_timeout, and
# the xenstore events that retry the open meanwhile do not each wait again.
t0=$(date +%s)
add_disk "$dom" xvdi "rbd:rbd/img$P:mon_host=127.0.0.1\\:1:client_mount_timeout=2" >/dev/null
sim_wait_for 15 grep -q "rbd:rbd/img: cannot connect to the Ceph cluster" "$LOG" ||
	bk_fail "no message for an unreachable monitor"
sleep 1
[ "$(grep -c "rbd:rbd/img: cannot connect to the Ceph cluster" "$LOG")" = 1 ] ||
	bk_fail "the unreachable monitor was tried $(grep -c "cannot connect to the Ceph" "$LOG") times"
[ $(($(date +%s) - t0)) -lt 8 ] || bk_fail "xenstore events each waited for the monitor"
# and the daemon still serves: the snapshot disk answers.
front_ok "$dom" "$c" readonly
bk_done
