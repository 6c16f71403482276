# tests/blkfront/front-lib.sh: shared setup of the blkfront tests: a
# simulated host, guest domain 1 with a file-backed vbd served by xbd-back
# (in dom0), and helpers that run xbd-front or nbdkit as domain 1.
#
#   front_setup [disk add options...]   host + domain 1 + xvdb (16 MiB file
#                                       $WORK/disk.img) + xbd-back; sets
#                                       WORK, DOMU=1, DEVID, DISK
#   front_add_disk VDEV FILE [opts...]  another vbd for domain 1; prints devid
#   back_start / back_stop [SIGNAL]     (re)start or stop xbd-back (with $BACK_OPTS)
#   as_domu CMD...                      run CMD as domain 1 (in a subshell)

. "$top_srcdir/tests/lib/sim.sh"

XBD_FRONT="$top_builddir/blkfront/xbd-front"
XBD_BACK="$top_builddir/blkback/xbd-back"
PLUGIN="$top_builddir/blkfront/.libs/nbdkit-xbd-plugin.so"
DOMU=1
BACK_PID=

# fail, with the backend's log for the reader.
front_fail() {
	[ -s "$WORK/xbd-back.log" ] && { echo "--- xbd-back log:"; tail -n 40 "$WORK/xbd-back.log"; } >&2
	fail "$@"
}

front_need() {
	sim_need sim/xbd-sim xenstore/xbd-xenstored blkback/xbd-back blkfront/xbd-front
}

as_domu() {
	( sim_env "$DOMU"; exec "$@" )
}

back_start() {
	# shellcheck disable=SC2086 # BACK_OPTS is a list of options
	( sim_env 0; exec "$XBD_BACK" --foreground $BACK_OPTS "$@" ) >>"$WORK/xbd-back.log" 2>&1 &
	BACK_PID=$!
	sim_on_exit "back_stop"
}

# Stop xbd-back (with SIGNAL, default TERM); SIGKILL if it is not gone in 5 s.
back_stop() {
	[ -n "$BACK_PID" ] || return 0
	kill ${1:+-$1} "$BACK_PID" 2>/dev/null
	_n=0
	while kill -0 "$BACK_PID" 2>/dev/null && [ $_n -lt 100 ]; do
		sleep 0.05
		_n=$((_n + 1))
	done
	[ $_n -lt 100 ] || echo "xbd-back did not stop in 5 s: killed" >&2
	kill -9 "$BACK_PID" 2>/dev/null
	wait "$BACK_PID" 2>/dev/null
	BACK_PID=
}

# The backend of domain 1's device DEVID reached state $2.
back_state_is() {
	( sim_env 0; [ "$(xenstore-read "/local/domain/0/backend/vbd/$DOMU/$1/state" 2>/dev/null)" = "$2" ] )
}

front_add_disk() {
	_vdev=$1 _file=$2
	shift 2
	( sim_env 0; "$XBD_SIM" disk add "$SIMDIR" "$DOMU" "$_vdev" "$_file" "$@" ) ||
		fail "xbd-sim disk add $_vdev failed"
}

front_setup() {
	front_need
	sim_start
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-front-test.XXXXXXXX") || fail "mktemp failed"
	sim_on_exit "rm -rf '$WORK'"
	: >"$WORK/xbd-back.log"
	( sim_env 0; "$XBD_SIM" domain create "$SIMDIR" "$DOMU" >/dev/null ) ||
		fail "xbd-sim domain create failed"
	DISK="$WORK/disk.img"
	# a pattern, not zeros, so that reads of never-written data are checked too
	head -c 16777216 /dev/urandom >"$DISK" || fail "cannot create $DISK"
	DEVID=$(front_add_disk xvdb "$DISK" "$@") || exit 1
	back_start
	sim_wait_for 10 back_state_is "$DEVID" 2 || fail "xbd-back did not reach InitWait for xvdb"
}
