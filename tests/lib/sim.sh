# tests/lib/sim.sh: shell helpers for tests that run on a simulated Xen host.
#
# Source it from a test script (the harness exports top_srcdir/top_builddir):
#     . "$top_srcdir/tests/lib/sim.sh"
#
# Stable interface (other areas' tests rely on it; add, do not change):
#   skip MSG            print "SKIP: MSG" to stderr and exit 77
#   fail MSG            print "FAIL: MSG" to stderr and exit 1
#   sim_need BIN...     skip unless each program exists in the build tree;
#                       BIN is a path relative to $top_builddir
#                       (e.g. sim/xbd-sim, xenstore/xbd-xenstored, blkback/xbd-back)
#   sim_start           make a fresh temporary directory, start a simulated
#                       host in it and set SIMDIR; registers an EXIT trap
#                       that stops it (skips when xbd-sim or xbd-xenstored
#                       are not built yet)
#   sim_env DOMID       export XBD_SIM_DIR, XBD_SIM_DOMID and XENSTORED_PATH
#                       so that what runs next acts as domain DOMID
#   sim_stop            stop the host and remove SIMDIR (the trap does this too)
#   sim_on_exit CMD     run the shell command CMD at exit, before the host
#                       stops (e.g. to kill a background process); newest first
#   sim_wait_for SECS CMD...  run CMD until it succeeds or SECS seconds pass;
#                       returns CMD's last status
# Variables:
#   XBD_SIM             the xbd-sim binary
#   XBD_XENSTORED       the xbd-xenstored binary (exported: xbd-sim finds it there)
#   SIMDIR              the running host's directory (after sim_start)

: "${top_builddir:?top_builddir must be set (run through make check)}"
: "${top_srcdir:?top_srcdir must be set (run through make check)}"

XBD_SIM="$top_builddir/sim/xbd-sim"
XBD_XENSTORED="$top_builddir/xenstore/xbd-xenstored"
export XBD_XENSTORED
SIMDIR=
_sim_exit_cmds=

skip() {
	echo "SKIP: $*" >&2
	exit 77
}

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

sim_need() {
	for _sim_bin in "$@"; do
		[ -x "$top_builddir/$_sim_bin" ] ||
			skip "$_sim_bin is not built yet"
	done
}

sim_on_exit() {
	_sim_exit_cmds="$1
$_sim_exit_cmds"
}

_sim_cleanup() {
	_sim_rc=$?
	trap - EXIT
	# Run registered commands line by line; a failing one must not stop the rest.
	_sim_old_ifs=$IFS
	IFS='
'
	for _sim_cmd in $_sim_exit_cmds; do
		IFS=$_sim_old_ifs
		eval "$_sim_cmd" >/dev/null 2>&1 || :
	done
	IFS=$_sim_old_ifs
	_sim_exit_cmds=
	sim_stop
	exit $_sim_rc
}

sim_start() {
	sim_need sim/xbd-sim xenstore/xbd-xenstored
	SIMDIR=$(mktemp -d "${TMPDIR:-/tmp}/xbd-sim.XXXXXXXX") ||
		fail "mktemp failed"
	trap _sim_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	"$XBD_SIM" start "$SIMDIR" || fail "xbd-sim start $SIMDIR failed"
}

sim_env() {
	[ -n "$SIMDIR" ] || fail "sim_env before sim_start"
	_sim_envtext=$("$XBD_SIM" env "$SIMDIR" "$1") || fail "xbd-sim env $SIMDIR $1 failed"
	eval "$_sim_envtext"
}

sim_stop() {
	[ -n "$SIMDIR" ] || return 0
	if [ -d "$SIMDIR" ]; then
		"$XBD_SIM" stop "$SIMDIR" >/dev/null 2>&1 ||
			echo "warning: xbd-sim stop $SIMDIR failed" >&2
		rm -rf "$SIMDIR"
	fi
	SIMDIR=
}

sim_wait_for() {
	_sim_secs=$1
	shift
	_sim_end=$(( $(date +%s) + _sim_secs ))
	while :; do
		"$@" && return 0
		_sim_st=$?
		[ "$(date +%s)" -lt "$_sim_end" ] || return $_sim_st
		sleep 0.05
	done
}
