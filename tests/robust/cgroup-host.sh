#!/bin/sh
# cgroups = auto on the real host (no test hook): xbd-back says in one
# line at start whether each guest's worker gets a cgroup of its own and
# its weights, or why the weights cannot be applied here and what to do;
# it neither crashes nor stops serving when they cannot.  (On this
# machine: a hybrid host whose cgroup2 offers neither io nor cpu.)
. "$top_srcdir/tests/robust/lib.sh"
[ "$(id -u)" = 0 ] || skip "workers change uid and mount namespace: needs root"
unset XBD_TEST_CGROUP
A=$(new_domain)
new_disk "$WORK/a.img" 16M
da=$(add_disk "$A" xvdb "$WORK/a.img")
start_back --workers 1 --disk "$WORK/a.img:io-weight=500,cpu-weight=200"
wait_state "$A" "$da" 2
sim_wait_for 5 grep -q "cgroups: " "$LOG" || bk_fail "no start line about cgroups"
line=$(grep "cgroups: " "$LOG")
echo "$line"
[ "$(printf '%s\n' "$line" | wc -l)" = 1 ] || bk_fail "more than one cgroups line at start"
case $line in
*"each guest's worker in "*) echo "this host gives weights: nothing more to check here" ;;
*"weights not applied: "*)
	# Why, and what to do, in that line.
	printf '%s\n' "$line" | grep -q "cgroup v1\|hybrid\|not delegated\|neither the io nor the cpu\|root cgroup\|not writable\|no cgroup2" ||
		bk_fail "the line does not say why" ;;
*) bk_fail "the cgroups line says neither" ;;
esac
front_ok "$A" "$da" rw
back_alive
bk_done
