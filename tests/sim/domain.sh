#!/bin/sh
# tests/sim/domain.sh: `xbd-sim domain create` gives a domain the xenstore
# home libxl gives it (nodes and permissions) and fires @introduceDomain;
# `domain destroy` removes it and fires @releaseDomain; `domain list`
# shows what exists.
. "$top_srcdir/tests/lib/sim.sh"

sim_start
sim_env 0
tmp=$(mktemp -d) || fail "mktemp"
sim_on_exit "rm -rf '$tmp'"

# perms PATH: the (nX,rY) permissions xenstore-ls shows for PATH.
perms() {
	xenstore-ls -fp "$(dirname "$1")" | sed -n "s|^$1 = .*(\(.*\))\$|\1|p"
}

# seen KEY FILE N: the watch wrote N lines naming KEY (a function, so that
# sim_wait_for counts again each time it tries, not once before it starts)
seen() { [ "$(grep -c "$1" "$2")" = "$3" ]; }

watch_events() { # KEY FILE: watch KEY for 2 events (the initial one and one more)
	xenstore-watch -n 2 "$1" >"$2" 2>&1 &
	_wpid=$!
	sim_on_exit "kill $_wpid"
	sim_wait_for 5 grep -q "$1" "$2" || fail "xenstore-watch $1 did not start"
}

watch_events @introduceDomain "$tmp/intro"
domid=$("$XBD_SIM" domain create "$SIMDIR" --name guest1 --mem 64) || fail "domain create"
[ "$domid" = 1 ] || fail "first domain got id $domid, want 1"
sim_wait_for 5 seen @introduceDomain "$tmp/intro" 2 ||
	fail "no @introduceDomain after create: $(cat "$tmp/intro")"

h=/local/domain/1
[ "$(xenstore-read $h/name)" = guest1 ] || fail "name"
[ "$(xenstore-read $h/domid)" = 1 ] || fail "domid"
[ "$(xenstore-read $h/memory/target)" = 65536 ] || fail "memory/target in KiB"
vm=$(xenstore-read $h/vm) || fail "no vm node"
case $vm in /vm/????????-????-4???-????-????????????) ;; *) fail "vm=$vm is not /vm/UUID" ;; esac
[ "$(xenstore-read "$vm/name")" = guest1 ] || fail "$vm/name"
[ "$(xenstore-read /libxl/1/type)" = pv ] || fail "/libxl/1/type"

for want in "$h n0,r1" "$h/name n0,r1" "$h/device n0,r1" "$h/control n0,r1" \
	"$h/data n1" "$h/drivers n1" "$h/feature n1" "$h/attr n1" "$h/error n1" \
	"$h/control/shutdown n1" "$h/control/feature-poweroff n1" \
	"$h/device/suspend/event-channel n1" "$vm n0,r1" "/libxl/1 n0"; do
	set -- $want
	got=$(perms "$1")
	[ "$got" = "$2" ] || fail "permissions of $1: ($got), want ($2)"
done

# The permissions hold for the guest itself.
sim_env 1
xenstore-write $h/data/x 1 || fail "domain 1 cannot write its data/"
if xenstore-write $h/name evil 2>/dev/null; then fail "domain 1 could rename itself"; fi
if xenstore-read /libxl/1/type >/dev/null 2>&1; then fail "domain 1 can read /libxl/1"; fi
sim_env 0

[ "$("$XBD_SIM" domain list "$SIMDIR")" = "0 Domain-0
1 guest1" ] || fail "domain list: $("$XBD_SIM" domain list "$SIMDIR")"

# Names and ids are unique; the next free id is taken when none is given.
if "$XBD_SIM" domain create "$SIMDIR" --name guest1 2>"$tmp/err"; then fail "duplicate name accepted"; fi
grep -q "already exists" "$tmp/err" || fail "duplicate name: $(cat "$tmp/err")"
[ "$("$XBD_SIM" domain create "$SIMDIR" 7)" = 7 ] || fail "domain create with DOMID 7"
if "$XBD_SIM" domain create "$SIMDIR" 7 2>"$tmp/err"; then fail "duplicate domid accepted"; fi
[ "$("$XBD_SIM" domain create "$SIMDIR")" = 2 ] || fail "next free domid is not 2"
[ "$(xenstore-read /local/domain/2/name)" = domU-2 ] || fail "default name"

watch_events @releaseDomain "$tmp/release"
"$XBD_SIM" domain destroy "$SIMDIR" 1 || fail "domain destroy"
sim_wait_for 5 seen @releaseDomain "$tmp/release" 2 ||
	fail "no @releaseDomain after destroy: $(cat "$tmp/release")"
for p in $h /libxl/1 "$vm"; do
	if xenstore-read "$p" >/dev/null 2>&1; then fail "$p survived destroy"; fi
done
[ ! -S "$SIMDIR/xenstore/domain/1.sock" ] || fail "domain 1's socket survived destroy"
[ "$("$XBD_SIM" domain list "$SIMDIR")" = "0 Domain-0
2 domU-2
7 domU-7" ] || fail "domain list after destroy: $("$XBD_SIM" domain list "$SIMDIR")"
if "$XBD_SIM" domain destroy "$SIMDIR" 1 2>"$tmp/err"; then fail "destroyed domain 1 twice"; fi
grep -q "no domain 1" "$tmp/err" || fail "destroy twice: $(cat "$tmp/err")"
exit 0
