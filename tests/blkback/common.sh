# tests/blkback/common.sh: shared set-up for xbd-back's tests.  Sourced by
# each test; starts a simulated host (skips while its parts are missing)
# and gives helpers to add disks, run rawfront as a guest and read
# xenstore as dom0.

. "$top_srcdir/tests/lib/sim.sh"
sim_need sim/xbd-sim xenstore/xbd-xenstored blkback/xbd-back tests/blkback/rawfront
command -v xenstore-read >/dev/null 2>&1 || skip "xenstore-read (xenstore-utils) not installed"

XBD_BACK="$top_builddir/blkback/xbd-back"
XBDCTL="$top_builddir/blkback/xbdctl"
RAWFRONT="$top_builddir/tests/blkback/rawfront"
# An installed $(sysconfdir)/xbd/xbd-back.conf must not change the tests.
XBD_BACK_CONFIG=/dev/null
export XBD_BACK_CONFIG

sim_start
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-bk.XXXXXXXX") || fail "mktemp failed"
sim_on_exit "rm -rf '$WORK'"
LOG="$WORK/back.log"
: >"$LOG"

# asdom DOMID CMD...: run CMD as domain DOMID (usable inside --run strings).
cat >"$WORK/asdom" <<EOS
#!/bin/sh
d=\$1; shift
eval "\$('$XBD_SIM' env '$SIMDIR' "\$d")" || exit 1
exec "\$@"
EOS
chmod +x "$WORK/asdom"
ASDOM="$WORK/asdom"

bk_fail() {
	echo "--- xbd-back log:" >&2
	cat "$LOG" >&2
	fail "$@"
}

new_domain() {
	"$XBD_SIM" domain create "$SIMDIR" || fail "xbd-sim domain create failed"
}

# new_disk FILE SIZE
new_disk() {
	truncate -s "$2" "$1" || fail "cannot create $1"
}

# add_disk DOMID VDEV TARGET [xbd-sim disk add options]: prints the devid.
add_disk() {
	_d=$1 _v=$2 _t=$3
	shift 3
	"$XBD_SIM" disk add "$SIMDIR" "$_d" "$_v" "$_t" "$@" || fail "xbd-sim disk add $_d $_v failed"
}

# xs CMD ARGS: a xenstore-CMD as dom0.
xs() {
	(_c=$1 && shift && sim_env 0 && exec "xenstore-$_c" "$@")
}

# bstate DOMID DEVID [TYPE]: the backend's state node.
bstate() {
	xs read "/local/domain/0/backend/${3:-vbd}/$1/$2/state" 2>/dev/null
}

# run_back ARGS...: xbd-back in the foreground as dom0 (use --run); log to $LOG.
run_back() {
	(sim_env 0 && exec "$XBD_BACK" "$@") 2>>"$LOG"
}

# start_back ARGS...: xbd-back in the background; BACK_PID is its pid.
start_back() {
	(sim_env 0 && exec "$XBD_BACK" "$@" 2>>"$LOG") &
	BACK_PID=$!
	sim_on_exit "kill $BACK_PID; wait $BACK_PID"
}

# front DOMID ARGS...: rawfront as domain DOMID.
front() {
	_d=$1
	shift
	"$ASDOM" "$_d" "$RAWFRONT" "$@"
}

# bkey DOMID DEVID KEY: a node of the vbd's backend directory.
bkey() {
	xs read "/local/domain/0/backend/vbd/$1/$2/$3"
}

# front_ok DOMID DEVID ARGS...: rawfront --dev DEVID ARGS as DOMID, its
# output appended to $WORK/out; fails the test (with that output) if it fails.
front_ok() {
	_fd=$1 _fv=$2
	shift 2
	front "$_fd" --dev "$_fv" "$@" >>"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "rawfront $* on $_fv failed"; }
}

state_is() {
	[ "$(bstate "$1" "$2" "$4")" = "$3" ]
}

# wait_state DOMID DEVID STATE [TYPE]: up to 10 s.
wait_state() {
	sim_wait_for 10 state_is "$@" || bk_fail "backend $1/$2 did not reach state $3 (is $(bstate "$1" "$2" "$4"))"
}

# bk_done: stop a background xbd-back with SIGTERM (it must exit 0), fail on
# any sanitizer report from xbd-back or rawfront, and pass.
bk_done() {
	if [ -n "${BACK_PID:-}" ] && kill -0 "$BACK_PID" 2>/dev/null; then
		kill -TERM "$BACK_PID"
		wait "$BACK_PID" || bk_fail "xbd-back exited with status $? after SIGTERM"
	fi
	BACK_PID=
	if grep -l "Sanitizer\|runtime error:" "$LOG" "$WORK"/out* 2>/dev/null; then
		cat "$WORK"/out* >&2 2>/dev/null
		bk_fail "sanitizer report"
	fi
	exit 0
}
