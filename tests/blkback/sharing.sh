#!/bin/sh
# One image is never served read-write to several guests by accident.
# Asserted, with each refusal in the log, in `xbdctl list`, in xenstore's
# xbd-storage and in the hotplug script's hotplug-error (what xl prints):
#  - one image read-write to three guests: the first gets it, the second
#    and third are refused, naming the device and domain that has it, and
#    so is a read-only disk of it beside the writer;
#  - read-only sharing is always allowed;
#  - shared read-write where asked for: shared-write = 1, or the mode w!
#    (Xen's block script's forced mode); a plain read-write disk beside
#    shared ones is refused;
#  - the same VM twice (the two domains of a live migration on one host:
#    the same vm node) shares;
#  - another xbd-back (a second simulated host's, another process) is
#    refused the image the first has, by the file lock; one whose guest
#    is a migration's receiving end (a name ending --incoming) waits for
#    it instead, and opens once the first lets go.
. "$top_srcdir/tests/blkback/common.sh"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
SCRIPT="$top_srcdir/blkback/installed/xbd-hotplug"

A=$(new_domain --name web1)
B=$(new_domain --name web2)
C=$(new_domain --name web3)
for f in one two three four; do
	new_disk "$WORK/$f.img" 16M
done
# refused DOMID DEVID WHY: refused for WHY, in the log, xbdctl list and the hotplug script.
refused() {
	wait_storage 20 here "$1" "$2" "refused: "
	storage here "$1" "$2" | grep -qF "$3" || bk_fail "vbd/$1/$2: xbd-storage '$(storage here "$1" "$2")' does not say: $3"
	grep -q "vbd/$1/$2: refused: .*$3" "$LOG" || bk_fail "vbd/$1/$2: no log line saying: $3"
	ctl list | grep -q "^vbd/$1/$2: refused: .*$3" || { ctl list; bk_fail "vbd/$1/$2: xbdctl list does not say: $3"; }
	(sim_env 0 && XENBUS_PATH=backend/vbd/$1/$2 sh "$SCRIPT" add) 2>/dev/null &&
		bk_fail "vbd/$1/$2: the hotplug script passed it"
	bkey "$1" "$2" hotplug-error | grep -qF "$3" ||
		bk_fail "vbd/$1/$2: hotplug-error '$(bkey "$1" "$2" hotplug-error)' does not say: $3"
}

start_back_ctl --disk "$WORK/three.img:shared-write=1"
a=$(add_disk "$A" xvdb "$WORK/one.img")
wait_storage 20 here "$A" "$a" open
b=$(add_disk "$B" xvdb "$WORK/one.img")
c=$(add_disk "$C" xvdb "$WORK/one.img")
refused "$B" "$b" "is in use read-write by vbd/$A/$a (domain web1)"
refused "$C" "$c" "is in use read-write by vbd/$A/$a (domain web1)"
r=$(add_disk "$B" xvdc "$WORK/one.img" --mode r)
refused "$B" "$r" "is in use read-write by vbd/$A/$a (domain web1)"
echo "one image read-write to three guests: the second and third refused, a reader too"

for d in $A $B $C; do
	eval "ro_$d=\$(add_disk $d xvdd $WORK/two.img --mode r)"
done
for d in $A $B $C; do
	eval "wait_storage 20 here $d \$ro_$d open"
done
w=$(add_disk "$A" xvde "$WORK/two.img")
refused "$A" "$w" "is in use read-only by vbd/"
echo "read-only sharing allowed; a writer beside readers refused"

s1=$(add_disk "$A" xvdf "$WORK/three.img")
s2=$(add_disk "$B" xvdf "$WORK/three.img")
wait_storage 20 here "$A" "$s1" open
wait_storage 20 here "$B" "$s2" open
# Xen's block script's forced mode: w! (xl cannot write it; another toolstack can).
m1=$(add_disk "$A" xvdg "$WORK/four.img" --mode 'w!')
m2=$(add_disk "$B" xvdg "$WORK/four.img" --mode 'w!')
wait_storage 20 here "$A" "$m1" open
wait_storage 20 here "$B" "$m2" open
m3=$(add_disk "$C" xvdg "$WORK/four.img")
refused "$C" "$m3" "is in use read-write (shared) by vbd/"
echo "shared read-write where asked for (shared-write = 1, mode w!); a plain writer beside them refused"

# The two domains of a live migration on one host: the same VM.
D=$(new_domain --name web1--incoming)
xs write "/local/domain/$D/vm" "$(xs read "/local/domain/$A/vm")"
dd=$(add_disk "$D" xvdb "$WORK/one.img")
wait_storage 20 here "$D" "$dd" open
echo "the same VM twice (a migration on one host): shared"

# Another xbd-back, on a second simulated host: the file lock.
other_host
O1=$("$XBD_SIM" domain create "$OTHER" --name db1) || fail "domain create on the other host"
o1=$("$XBD_SIM" disk add "$OTHER" "$O1" xvdb "$WORK/one.img") || fail "disk add on the other host"
start_other_back --control "$WORK/other.sock"
sim_wait_for 20 test -S "$WORK/other.sock" || fail "the other xbd-back did not start"
wait_storage 20 other "$O1" "$o1" "refused: "
storage other "$O1" "$o1" | grep -q "is in use by another process" ||
	bk_fail "the other host's refusal: $(storage other "$O1" "$o1")"
grep -q "vbd/$O1/$o1: refused: .*is in use by another process" "$WORK/other.log" ||
	{ cat "$WORK/other.log"; bk_fail "the other xbd-back's log does not say it"; }
echo "another xbd-back is refused the image"
# A migration's receiving end there waits for the image instead, and gets it once it is let go.
O2=$("$XBD_SIM" domain create "$OTHER" --name web1--incoming) || fail "domain create on the other host"
o2=$("$XBD_SIM" disk add "$OTHER" "$O2" xvdb "$WORK/one.img") || fail "disk add on the other host"
wait_storage 20 other "$O2" "$o2" "retrying: "
"$XBD_SIM" disk remove "$SIMDIR" "$A" "$a" --timeout 5 || bk_fail "disk remove $a"
"$XBD_SIM" disk remove "$SIMDIR" "$D" "$dd" --timeout 5 || bk_fail "disk remove $dd"
wait_storage 30 other "$O2" "$o2" open
echo "a migration's receiving end waits for the image, and opens once it is let go"
stop_pid "$OTHER_PID" TERM 20 || { cat "$WORK/other.log"; bk_fail "the other xbd-back exited with status $?"; }
grep -q "Sanitizer\|runtime error:" "$WORK/other.log" && { cat "$WORK/other.log"; bk_fail "sanitizer report from the other xbd-back"; }
bk_done
