# tests/backup/lib.sh: the set-up of the backup tests (changed-block
# tracking, checkpoints, point-in-time views and their export; xbd-back's
# control/checkpoint.c, datapath/cbt.c and cbw.c, export/).  Sourced by
# each test: tests/robust/lib.sh's set-up and guests (a simulated host,
# fio through `nbdkit xbd` as a guest: fio_job, nbd_run, fio_nbd, fio_ok;
# in_flight, none_in_flight),
# and what only these tests use:
#
#   need_backup              skip unless fio, nbdkit, both plugins, nbdcopy, python3
#   ctl ARGS...              xbdctl as dom0
#   start_cbt ARGS...        start_back with cbt-dir WORK/cbt
#   dev_of DOMID DEVID       vbd/DOMID/DEVID
#   writes DEVICE            its write requests so far; writing DEVICE N: more than N
#   guest_pause PID DOMID DEVID   a guest (PID and its children: nbdkit xbd, fio) stopped
#                            with SIGSTOP, and its disk quiet: what xl pause gives
#   guest_resume             SIGCONT to what guest_pause stopped
#   view_file OUT            the view file a `checkpoint --view`'s answer names
#   export_run VIEW CKPT CMD nbdkit xbdview of that view running the shell
#                            command CMD ($uri, $sock set); CMD's status
#   incremental VIEW CKPT CHANGES IMAGE   the extents CHANGES lists (xbdctl changes
#                            --json or --xapi), read from the view's export into
#                            IMAGE; prints "EXTENTS BYTES"
#   covers CHANGES A B       every 64 KiB block A and B differ in is in CHANGES
#                            (--json): fails (a gap) otherwise; prints "DIFFERENT
#                            REPORTED OVER", OVER the blocks reported but unchanged
#
# VIEW_PLUGIN is blkback's nbdkit-xbdview-plugin.so; EXTENTS the NBD
# client of `incremental` (nbd-extents.py).

. "$top_srcdir/tests/robust/lib.sh"
VIEW_PLUGIN="$top_builddir/blkback/.libs/nbdkit-xbdview-plugin.so"
EXTENTS="$top_srcdir/tests/backup/nbd-extents.py"
DISK_QUIET="$top_srcdir/tests/backup/disk-quiet.py"

need_backup() {
	need_fio_nbd
	[ -f "$VIEW_PLUGIN" ] || skip "the xbdview nbdkit plugin is not built ($VIEW_PLUGIN)"
	command -v nbdcopy >/dev/null 2>&1 || skip "nbdcopy (libnbd-bin) is not installed"
	command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
}

ctl() {
	(sim_env 0 && exec "$XBDCTL" "$@")
}

start_cbt() {
	start_back --cbt-dir "$WORK/cbt" "$@"
}

dev_of() {
	echo "vbd/$1/$2"
}

writes() {
	ctl stats --json "$1" | python3 -c 'import json, sys
print(json.load(sys.stdin)["devices"][0]["stats"]["requests"]["write"])'
}

writing() {
	[ "$(writes "$1")" -gt "$2" ]
}

_bk_tree() {
	echo "$1"
	for _bk_c in $(pgrep -P "$1"); do _bk_tree "$_bk_c"; done
}

# _bk_idle DOMID DEVID: none of the disk's requests in flight, and, while
# its frontend is Connected, every ring asleep with all that its guest had
# produced consumed (the ring view xbdctl's stats show): a stopped guest's
# disk changes no more.  (A frontend that closed has nothing in its rings.)
_bk_idle() {
	none_in_flight "$1" "$2" || return 1
	[ "$(xs read "$(bkey "$1" "$2" frontend)/state" 2>/dev/null)" = 4 ] || return 0
	ctl stats --json "vbd/$1/$2" 2>/dev/null | python3 "$DISK_QUIET"
}

guest_pause() {
	GUEST_STOPPED=$(_bk_tree "$1")
	# shellcheck disable=SC2086 # a list of pids
	kill -STOP $GUEST_STOPPED 2>/dev/null
	# Stopped, it sends nothing more; what it sent is answered (into its ring).
	sim_wait_for 20 _bk_idle "$2" "$3" ||
		bk_fail "the paused guest's disk did not go quiet ($(in_flight "$2" "$3") in flight)"
}

guest_resume() {
	# shellcheck disable=SC2086
	kill -CONT $GUEST_STOPPED 2>/dev/null
	GUEST_STOPPED=
}

view_file() {
	sed -n 's/.* view=\([^ ]*\) .*/\1/p' "$1"
}

export_run() {
	nbdkit_run "$3" env $NBDKIT_PRELOAD nbdkit -f -U - "$VIEW_PLUGIN" view="$1" checkpoint="$2"
}

incremental() {
	export_run "$1" "$2" "python3 '$EXTENTS' \"\$sock\" '$3' '$4'"
}

covers() {
	python3 - "$1" "$2" "$3" <<'PY'
import json, sys
ch = json.load(open(sys.argv[1]))
g = 65536
rep = set()
for e in ch["extents"]:
    for o in range(e["offset"], e["offset"] + e["length"], ch["granularity"]):
        rep.update(range(o // g, (o + ch["granularity"] - 1) // g + 1))
a, b = open(sys.argv[2], "rb"), open(sys.argv[3], "rb")
diff, i = set(), 0
while True:
    x, y = a.read(g), b.read(g)
    if not x and not y:
        break
    if x != y:
        diff.add(i)
    i += 1
gap = sorted(diff - rep)
print(len(diff), len(rep), len(rep - diff))
if gap:
    print("blocks changed and NOT reported:", gap[:20], file=sys.stderr)
    sys.exit(1)
PY
}
