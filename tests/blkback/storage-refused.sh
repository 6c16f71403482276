#!/bin/sh
# A storage open that can never succeed is refused, not retried for ever:
# a qcow2 image given as raw, a directory as the disk's path and a missing
# file each get one log line, stay refused (xbdctl's JSON: storage
# "refused", no next try, one try while a transient failure beside them
# is tried again and again), `xbdctl list` names the reason, xenstore's
# xbd-storage says "refused: WHY", and the hotplug script fails the disk
# with that reason in hotplug-error ("does not exist" for the missing
# file), as xl then reports.  An NBD server that is down is a transient
# failure: retried with backoff, "retrying: WHY", passed by the script.
# SIGHUP tries a refused one again (the missing file, created meanwhile).
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
SCRIPT="$top_srcdir/blkback/installed/xbd-hotplug"

dom=$(new_domain)
printf 'QFI\373\0\0\0\3' >"$WORK/q.img"
truncate -s 16M "$WORK/q.img"
mkdir "$WORK/dir.img"
q=$(add_disk "$dom" xvdb "$WORK/q.img")
d=$(add_disk "$dom" xvdc "$WORK/dir.img")
m=$(add_disk "$dom" xvdd "$WORK/missing.img")
# Nothing listens on port 1 of the loopback: a server that is down.
n=$(add_disk "$dom" xvde "nbd://127.0.0.1:1/disk")
start_back_ctl
for x in $q $d $m $n; do
	wait_state "$dom" "$x" 2
done

# jq on the JSON of device DEVID: jqd DEVID FILTER
jqd() {
	ctl list --json | jq -r ".devices[] | select(.devid == $1) | $2"
}
# The transient one is tried again (1 s, then 2 s): its third try is the clock.
sim_wait_for 20 sh -c "[ \"\$('$XBDCTL' --socket '$CTL' list --json |
	jq '.devices[] | select(.devid == $n) | .storage.failed_tries')\" -ge 3 ]" ||
	bk_fail "the NBD disk was not tried again ($(jqd "$n" .storage))"
[ "$(jqd "$n" .storage.state)" = failed ] || bk_fail "the NBD disk's storage is $(jqd "$n" .storage.state)"
[ "$(bkey "$dom" "$n" xbd-storage | cut -d: -f1)" = retrying ] ||
	bk_fail "xbd-storage of the NBD disk: $(bkey "$dom" "$n" xbd-storage)"
for x in "$q:is a qcow2 image, not a raw disk" "$d:is a directory, not a file or block device" \
	"$m:does not exist"; do
	dev=${x%%:*} why=${x#*:}
	[ "$(jqd "$dev" .storage.state)" = refused ] || bk_fail "devid $dev: storage $(jqd "$dev" .storage)"
	[ "$(jqd "$dev" .storage.failed_tries)" = 1 ] || bk_fail "devid $dev: tried again: $(jqd "$dev" .storage)"
	[ "$(jqd "$dev" .storage.retry_in_ms)" = null ] || bk_fail "devid $dev: a next try is due: $(jqd "$dev" .storage)"
	jqd "$dev" .storage.error | grep -qF "$why" || bk_fail "devid $dev: the JSON's error: $(jqd "$dev" .storage.error)"
	ctl list >"$WORK/list"
	grep -q "^vbd/$dom/$dev: refused: .*$why" "$WORK/list" || { cat "$WORK/list"; bk_fail "xbdctl list does not say why devid $dev is refused"; }
	bkey "$dom" "$dev" xbd-storage | grep -q "^refused: .*$why" ||
		bk_fail "xbd-storage of devid $dev: $(bkey "$dom" "$dev" xbd-storage)"
	[ "$(grep -c "vbd/$dom/$dev: " "$LOG")" = 1 ] || { grep "vbd/$dom/$dev: " "$LOG"; bk_fail "devid $dev: not one log line"; }
	# The hotplug script fails it, with the reason, as xl reports it.
	(sim_env 0 && XENBUS_PATH=backend/vbd/$dom/$dev sh "$SCRIPT" add) 2>"$WORK/err" &&
		bk_fail "the hotplug script passed devid $dev"
	[ "$(bkey "$dom" "$dev" hotplug-status)" = error ] || bk_fail "devid $dev: hotplug-status $(bkey "$dom" "$dev" hotplug-status)"
	bkey "$dom" "$dev" hotplug-error | grep -qF "$why" ||
		bk_fail "devid $dev: hotplug-error: $(bkey "$dom" "$dev" hotplug-error)"
done
echo "qcow2, directory, missing file: refused once, said in xbdctl list, xenstore and the hotplug script"
(sim_env 0 && XENBUS_PATH=backend/vbd/$dom/$n sh "$SCRIPT" add) 2>"$WORK/err" ||
	{ cat "$WORK/err"; bk_fail "the hotplug script failed the NBD disk whose server is down"; }
[ "$(bkey "$dom" "$n" hotplug-status)" = connected ] || bk_fail "NBD disk: hotplug-status $(bkey "$dom" "$n" hotplug-status)"
echo "a server that is down: retried, passed"

# Fixed, then SIGHUP: the refused disk is tried again and opens.
new_disk "$WORK/missing.img" 16M
kill -HUP "$BACK_PID"
sim_wait_for 10 sh -c "[ \"\$('$XBDCTL' --socket '$CTL' list --json |
	jq -r '.devices[] | select(.devid == $m) | .storage.state')\" = open ]" ||
	bk_fail "after SIGHUP the created file did not open ($(jqd "$m" .storage))"
[ "$(bkey "$dom" "$m" xbd-storage)" = open ] || bk_fail "xbd-storage after SIGHUP: $(bkey "$dom" "$m" xbd-storage)"
echo "the missing file created, SIGHUP: opened"
bk_done
