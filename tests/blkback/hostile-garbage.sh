#!/bin/sh
# xbd-back: 3000 requests of random bytes (random ops, segment counts,
# sectors, grants, indirect pages) are each answered with OKAY, ERROR or
# EOPNOTSUPP; the daemon survives and the device still works afterwards.
. "$top_srcdir/tests/blkback/common.sh"

dom=$(new_domain)
new_disk "$WORK/a.img" 16M
a=$(add_disk "$dom" xvdb "$WORK/a.img")
for args in "--persistent 1" "--persistent 0" "--persistent 0 map" "--abi x86_32-abi"; do
	back=
	case $args in *map) args=${args% map}; back="--grants map" ;; esac
	# shellcheck disable=SC2086
	run_back $back --run "'$ASDOM' $dom '$RAWFRONT' --dev $a $args garbage" >"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "random requests broke the backend ($args)"; }
	grep "garbage:" "$WORK/out"
done
bk_done
