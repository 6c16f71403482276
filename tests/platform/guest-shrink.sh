#!/bin/sh
# guest-shrink: the security review's trigger, end to end.  While a guest's
# disk is busy under fio (nbdkit xbd acting as the guest, verify=crc32c),
# the guest side tries to truncate every piece of simulated hypervisor
# memory of this host it can reach: through every fd of it that any
# process holds (the guest's own frontend, xbd-back, the host's keeper, via
# /proc/PID/fd) and anything left in the memdir.  Every attempt must fail,
# xbd-back (dom0) must stay up, and every fio run must verify with 0
# errors.  (When guest memory was a plain file, `truncate -s 0
# MEMDIR/dom-N.mem` killed xbd-back with SIGBUS, for every guest.)
. "$top_srcdir/tests/robust/lib.sh"
need_fio_nbd

G=$(new_domain)
truncate -s 16M "$WORK/g.img" || fail "truncate"
add_disk "$G" xvdb "$WORK/g.img" >/dev/null
start_back
victim_start g "$G" xvdb 4m

memdir=$(readlink -f "$SIMDIR/hv/mem" 2>/dev/null) || memdir=
[ -n "$memdir" ] && [ -d "$memdir" ] || memdir="$SIMDIR/hv"
tried=0
for fd in /proc/[0-9]*/fd/*; do
	link=$(readlink "$fd" 2>/dev/null) || continue
	case $link in
	"/memfd:$memdir/"*) ;;
	*) continue ;;
	esac
	tried=$((tried + 1))
	if truncate -s 0 "$fd" 2>/dev/null; then
		bk_fail "truncated $link through $fd"
	fi
	if truncate -s +4096 "$fd" 2>/dev/null; then
		bk_fail "grew $link through $fd"
	fi
done
for f in "$memdir"/dom-*; do
	[ -f "$f" ] || continue
	tried=$((tried + 1))
	truncate -s 0 "$f" 2>/dev/null && bk_fail "truncated $f"
done
# The guest's memory, grant table and Xen files, and the host file, at the least.
[ "$tried" -ge 4 ] || bk_fail "found only $tried memory files of this host to attack"
echo "ok: $tried truncations of simulated hypervisor memory refused"

back_alive
runs=$(victim_runs g)
sim_wait_for 30 sh -c "[ \$(wc -l <'$WORK/g.runs') -ge $((runs + 2)) ]" ||
	bk_fail "fio did not complete two more runs after the attack"
victim_stop g
back_alive
bk_done
