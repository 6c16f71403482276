# tests/lib/xbd.sh: the one shell library of the tests that run xbd's
# programs on a simulated host: the paths of the binaries, a per-test WORK
# folder and xbd-back's LOG, running things as a domain, domains and disks,
# xenstore as dom0, backend states, xbd-back in the background or in the
# foreground, rawfront as a guest, nbdkit's preload, and the failure and
# success endings.  Each area's entry file (tests/blkback/common.sh,
# tests/robust/lib.sh, tests/blkfront/front-lib.sh, tests/e2e/lib.sh)
# sources it and adds only what is its own; tests/README.md says which to
# use.  Built on tests/lib/sim.sh (skip, fail, sim_start, sim_env,
# sim_on_exit, sim_wait_for ...), which stays the simulator's own interface.
#
# Setting up
#   bk_need BIN...        skip (77) unless the simulator, xenstore-utils and
#                         each BIN (relative to $top_builddir) are there
#   bk_setup [BIN...]     bk_need BIN..., then a fresh simulated host, WORK
#                         (removed at exit), an empty LOG and ASDOM; at exit
#                         a running xbd-back is stopped before the host
# Domains, disks, xenstore
#   new_domain [DOMID] [--mem MiB] [--name NAME]   prints the new domid
#   new_disk FILE SIZE    a sparse file of SIZE (truncate -s)
#   add_disk DOMID VDEV TARGET [xbd-sim disk add options]   prints the devid
#   xs CMD ARGS...        xenstore-CMD as dom0
#   bstate DOMID DEVID [TYPE]        the backend's state node (TYPE vbd)
#   bkey DOMID DEVID KEY  a node of the vbd's backend directory
#   state_is DOMID DEVID STATE [TYPE]
#   wait_state DOMID DEVID STATE [TYPE]   up to 10 s, or bk_fail
#   "$ASDOM" DOMID CMD... run CMD as domain DOMID (a script: also usable
#                         inside --run strings and sh -c)
# xbd-back
#   start_back ARGS...    xbd-back as dom0 in the background, in a session
#                         of its own, stdout and stderr appended to LOG;
#                         BACK_PID is its pid
#   run_back ARGS...      xbd-back in the foreground (use --run); stderr to
#                         LOG, stdout to the caller; its exit status
#   start_back_ctl ARGS...   start_back with a control socket of its own
#                         (CTL, in WORK), once the socket is there (10 s)
#   ctl ARGS...           xbdctl on that socket
#   stop_back [SIGNAL]    SIGNAL (TERM) to BACK_PID, SIGKILL if it has not
#                         exited 20 s later; returns its exit status (0
#                         when none runs) and clears BACK_PID
#   back_alive            bk_fail unless xbd-back is running
#   back_pids             BACK_PID and its workers' pids, one a line
#   stop_pid PID [SIGNAL] [SECS]   the same for any child of the test
#   other_host            a second simulated host (OTHER: its directory,
#                         stopped at exit), for a second xbd-back beside
#                         this host's (another process, another host)
#   as_other DOMID CMD... run CMD as domain DOMID of that host
#   start_other_back ARGS...  an xbd-back there, in the background, its
#                         output in WORK/other.log; OTHER_PID is its pid
#                         (stopped at exit)
#   storage HOST DOMID DEVID   the disk's xbd-storage (xbd-back's verdict on
#                         its storage: open, opening, retrying: WHY,
#                         refused: WHY) on this host (HOST here) or the other
#   wait_storage SECS HOST DOMID DEVID WHAT   until it is WHAT (open,
#                         opening) or, for WHAT "refused: " or "retrying: ",
#                         starts with it; or bk_fail
#   ceph_cluster BYTES    a throwaway Ceph cluster (tests/lib/ceph-cluster.sh,
#                         memstore of BYTES), stopped at exit: CEPH_CONF
#                         and CEPH_KEYRING set, pool rbd; skips without Ceph
#   journal_listen        a socket standing in for journald's native one, at
#                         WORK/journal.sock, each datagram a file WORK/msg.N
#                         (N from 000000); needs python3
#   notify_listen         a socket standing in for systemd's (sd_notify), at
#                         WORK/notify, each message a line of WORK/notified
#                         (its newlines as spaces); set NOTIFY_SOCKET to it
#                         for the xbd-back to start; needs python3
# Guests
#   front_ok DOMID DEVID ARGS...   rawfront --dev DEVID ARGS as DOMID, its
#                         output appended to WORK/out; bk_fail (with that
#                         output) if it fails
#   front DOMID ARGS...   rawfront (tests/blkback/rawfront) as DOMID; in
#                         the background, where $! must be rawfront itself
#                         (to kill it), use "$ASDOM" DOMID "$RAWFRONT" ...:
#                         the $! of a function is a subshell's
#   front_paused DOMID DEVID OUT [ARGS...]   rawfront's pause scenario in
#                         the background, output in OUT, until it is
#                         connected and paused (20 s, or bk_fail); it goes
#                         on once "$WORK/go" exists; its pid is FRONT_PID
#   need_nbdkit           skip unless nbdkit and the xbd plugin are there
#                         and loadable; sets NBDKIT_PRELOAD, the
#                         environment nbdkit needs for an ASan-built plugin
#   have_fio_nbd / need_fio_nbd   the same, and fio with ioengine=nbd
#                         (status / skip); also set NBDKIT_PRELOAD
# Endings
#   bk_fail MSG           the end of LOG (and of the other logs in WORK) on
#                         stderr, then FAIL: MSG and exit 1
#   bk_done               stop_back (it must exit 0), bk_fail on any
#                         sanitizer report in LOG or WORK/out*, WORK/*.out,
#                         exit 0
# Variables: XBD_BACK (XBD_TEST_BACK if set) XBDCTL XBD_FRONT RAWFRONT PLUGIN (binaries), WORK,
# LOG, ASDOM, BACK_PID, CTL, OTHER, OTHER_PID, NBDKIT_PRELOAD, BK_SETSID (setsid, if there is one:
# for other daemons that must not get a terminal's Ctrl-C), and sim.sh's
# XBD_SIM and SIMDIR.

. "$top_srcdir/tests/lib/sim.sh"

# XBD_TEST_BACK: another build's xbd-back (tests/build/disable-shared.sh)
XBD_BACK="${XBD_TEST_BACK:-$top_builddir/blkback/xbd-back}"
XBDCTL="$top_builddir/xbdctl/xbdctl"
XBD_FRONT="$top_builddir/blkfront/xbd-front"
RAWFRONT="$top_builddir/tests/blkback/rawfront"
PLUGIN="$top_builddir/blkfront/.libs/nbdkit-xbd-plugin.so"
# An installed $(sysconfdir)/xbd/xbd-back.conf must not change the tests.
XBD_BACK_CONFIG=/dev/null
export XBD_BACK_CONFIG
WORK=
LOG=
ASDOM=
BACK_PID=
CTL=
OTHER=
OTHER_PID=
NBDKIT_PRELOAD=

# The daemons run in a session of their own (setsid): a Ctrl-C at the
# terminal then reaches only the script (and what runs in the foreground),
# and the script's exit trap stops the daemons in order: what the test
# started last first (a guest's nbdkit, while xbd-back can still answer its
# Closing/Closed handshake), then xbd-back, then the host.
BK_SETSID=
command -v setsid >/dev/null 2>&1 && BK_SETSID=setsid

bk_need() {
	sim_need sim/xbd-sim xenstore/xbd-xenstored "$@"
	command -v xenstore-read >/dev/null 2>&1 || skip "xenstore-read (xenstore-utils) not installed"
}

bk_setup() {
	bk_need "$@"
	sim_start
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-bk.XXXXXXXX") || fail "mktemp failed"
	sim_on_exit "rm -rf '$WORK'"
	# (newer than the line above: runs before it)
	sim_on_exit "_bk_stop_at_exit"
	LOG="$WORK/back.log"
	: >"$LOG"
	cat >"$WORK/asdom" <<EOS
#!/bin/sh
d=\$1; shift
eval "\$('$XBD_SIM' env '$SIMDIR' "\$d")" || exit 1
exec "\$@"
EOS
	chmod +x "$WORK/asdom"
	ASDOM="$WORK/asdom"
}

bk_fail() {
	if [ -n "$LOG" ] && [ -s "$LOG" ]; then
		echo "--- xbd-back log (last 80 lines):" >&2
		tail -n 80 "$LOG" >&2
	fi
	for _bk_l in "$WORK"/*.log; do
		[ -n "$WORK" ] && [ -s "$_bk_l" ] && [ "$_bk_l" != "$LOG" ] || continue
		echo "--- $_bk_l (last 10 lines):" >&2
		tail -n 10 "$_bk_l" >&2
	done
	fail "$@"
}

bk_done() {
	stop_back || bk_fail "xbd-back exited with status $? after SIGTERM"
	if grep -l "Sanitizer\|runtime error:" "$LOG" "$WORK"/out* "$WORK"/*.out 2>/dev/null; then
		cat "$WORK"/out* "$WORK"/*.out >&2 2>/dev/null
		bk_fail "sanitizer report"
	fi
	exit 0
}

new_domain() {
	"$XBD_SIM" domain create "$SIMDIR" "$@" || fail "xbd-sim domain create failed"
}

new_disk() {
	truncate -s "$2" "$1" || fail "cannot create $1"
}

add_disk() {
	_bk_d=$1 _bk_v=$2 _bk_t=$3
	shift 3
	"$XBD_SIM" disk add "$SIMDIR" "$_bk_d" "$_bk_v" "$_bk_t" "$@" ||
		fail "xbd-sim disk add $_bk_d $_bk_v failed"
}

xs() {
	(_bk_c=$1 && shift && sim_env 0 && exec "xenstore-$_bk_c" "$@")
}

bstate() {
	xs read "/local/domain/0/backend/${3:-vbd}/$1/$2/state" 2>/dev/null
}

bkey() {
	xs read "/local/domain/0/backend/vbd/$1/$2/$3"
}

state_is() {
	[ "$(bstate "$1" "$2" "$4")" = "$3" ]
}

wait_state() {
	sim_wait_for 10 state_is "$@" ||
		bk_fail "backend $1/$2 did not reach state $3 (is $(bstate "$1" "$2" "$4"))"
}

run_back() {
	(sim_env 0 && exec "$XBD_BACK" "$@") 2>>"$LOG"
}

start_back() {
	(sim_env 0 && exec $BK_SETSID "$XBD_BACK" "$@") >>"$LOG" 2>&1 &
	BACK_PID=$!
}

other_host() {
	OTHER=$WORK/other-host
	"$XBD_SIM" start "$OTHER" || fail "xbd-sim start $OTHER failed"
	sim_on_exit "'$XBD_SIM' stop '$OTHER'"
}

as_other() {
	(_bk_d=$1 && shift && eval "$("$XBD_SIM" env "$OTHER" "$_bk_d")" && exec "$@")
}

start_other_back() {
	(eval "$("$XBD_SIM" env "$OTHER" 0)" && exec $BK_SETSID "$XBD_BACK" "$@") >>"$WORK/other.log" 2>&1 &
	OTHER_PID=$!
	sim_on_exit "kill $OTHER_PID"
}

storage() {
	if [ "$1" = here ]; then
		bkey "$2" "$3" xbd-storage 2>/dev/null
	else
		as_other 0 xenstore-read "/local/domain/0/backend/vbd/$2/$3/xbd-storage" 2>/dev/null
	fi
}

# A verdict with its reason ("refused: ") by its start, open or opening whole.
_bk_storage_is() {
	case "$4:$(storage "$1" "$2" "$3")" in
	*": :$4"*) return 0 ;;
	"$4:$4") return 0 ;;
	*) return 1 ;;
	esac
}

wait_storage() {
	sim_wait_for "$1" _bk_storage_is "$2" "$3" "$4" "$5" ||
		bk_fail "$2: vbd/$3/$4: xbd-storage is '$(storage "$2" "$3" "$4")', not $5"
}

ceph_cluster() {
	_bk_ceph=$(mktemp -d "${TMPDIR:-/tmp}/ceph.XXXXXXXX") || fail "mktemp"
	sim_on_exit "sh '$top_srcdir/tests/lib/ceph-cluster.sh' stop '$_bk_ceph'"
	_bk_env=$(sh "$top_srcdir/tests/lib/ceph-cluster.sh" start "$_bk_ceph" "$1")
	_bk_rc=$?
	[ $_bk_rc = 77 ] && skip "no Ceph packages (scripts/install-deps.sh installs them)"
	[ $_bk_rc = 0 ] || fail "the Ceph test cluster did not start"
	eval "$_bk_env"
}

journal_listen() {
	python3 - "$WORK/journal.sock" "$WORK" <<'PY' &
import socket, sys, os
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
n = 0
while True:
    d = s.recv(65536)
    with open(os.path.join(sys.argv[2], "msg.%06d" % n), "wb") as f:
        f.write(d)
    n += 1
PY
	sim_on_exit "kill $!"
	sim_wait_for 10 test -S "$WORK/journal.sock" || fail "no journal stand-in socket"
}

notify_listen() {
	python3 - "$WORK/notify" "$WORK/notified" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as f:
    while True:
        f.write(s.recv(4096).decode().replace("\n", " ") + "\n")
        f.flush()
PY
	sim_on_exit "kill $!"
	sim_wait_for 20 test -S "$WORK/notify" || fail "notify listener did not start"
}

start_back_ctl() {
	CTL=$WORK/ctl.sock
	start_back --control "$CTL" "$@"
	sim_wait_for 10 test -S "$CTL" || bk_fail "no control socket $CTL"
}

ctl() {
	"$XBDCTL" --socket "$CTL" "$@"
}

stop_back() {
	[ -n "$BACK_PID" ] || return 0
	_bk_pid=$BACK_PID
	BACK_PID=
	stop_pid "$_bk_pid" "${1:-TERM}" 20
}

# back_pids: xbd-back (BACK_PID) and its workers (`xbd-back --worker`, one
# per guest domain that has a connected disk; worker.h).
back_pids() {
	[ -n "$BACK_PID" ] || return 0
	echo "$BACK_PID"
	pgrep -P "$BACK_PID" -f -- "--worker" || :
}

back_alive() {
	[ -n "$BACK_PID" ] && kill -0 "$BACK_PID" 2>/dev/null || bk_fail "xbd-back is not running"
}

stop_pid() {
	_sp_pid=$1 _sp_sig=${2:-TERM} _sp_secs=${3:-20} _sp_was=0
	if kill -0 "$_sp_pid" 2>/dev/null; then
		_sp_was=1
		kill "-$_sp_sig" "$_sp_pid" 2>/dev/null
		_sp_end=$(( $(date +%s) + _sp_secs ))
		while kill -0 "$_sp_pid" 2>/dev/null; do
			if [ "$(date +%s)" -ge "$_sp_end" ]; then
				echo "pid $_sp_pid ($(ps -o args= -p "$_sp_pid" | cut -c1-60)) did not exit within $_sp_secs s of SIG$_sp_sig: SIGKILL" >&2
				kill -KILL "$_sp_pid" 2>/dev/null
				break
			fi
			sleep 0.05
		done
	fi
	wait "$_sp_pid" 2>/dev/null
	_sp_rc=$?
	# 127: not (or no longer) a child of this shell, reaped earlier
	[ "$_sp_rc" = 127 ] && [ "$_sp_was" = 0 ] && _sp_rc=0
	return "$_sp_rc"
}

# At exit (sim_on_exit): a daemon still running is stopped, never waited
# for long, never failing the exit.
_bk_stop_at_exit() {
	[ -z "$BACK_PID" ] || stop_pid "$BACK_PID" TERM 10
	BACK_PID=
}

front() {
	_bk_d=$1
	shift
	"$ASDOM" "$_bk_d" "$RAWFRONT" "$@"
}

front_paused() {
	_bk_d=$1 _bk_v=$2 _bk_o=$3
	shift 3
	RAWFRONT_GO=$WORK/go "$ASDOM" "$_bk_d" "$RAWFRONT" --dev "$_bk_v" "$@" pause >"$_bk_o" 2>&1 &
	FRONT_PID=$!
	sim_on_exit "kill $FRONT_PID 2>/dev/null"
	sim_wait_for 20 grep -q paused "$_bk_o" || { cat "$_bk_o"; bk_fail "rawfront did not connect and pause"; }
}

# NBDKIT_PRELOAD: what nbdkit needs in its environment to load PLUGIN.  An
# ASan-built plugin needs libasan preloaded (nbdkit itself is not built
# with it); the clients (fio, qemu-img, nbdinfo) must not get it.  Returns
# 1 when the plugin needs libasan and there is none.  libstdc++ is
# preloaded too: a plugin that opens librbd (xbdview on an RBD disk)
# throws C++ exceptions, and ASan's __cxa_throw finds the real one only in
# a library loaded before it started (else "CHECK failed ... real___cxa_throw").
nbdkit_preload() {
	NBDKIT_PRELOAD=
	nm -D "$PLUGIN" 2>/dev/null | grep -q __asan_init || return 0
	_bk_asan=$(gcc -print-file-name=libasan.so)
	[ -f "$_bk_asan" ] || return 1
	_bk_cxx=$(gcc -print-file-name=libstdc++.so)
	[ -f "$_bk_cxx" ] && _bk_asan="$_bk_asan:$_bk_cxx"
	NBDKIT_PRELOAD="LD_PRELOAD=$_bk_asan ASAN_OPTIONS=detect_leaks=0"
}

need_nbdkit() {
	command -v nbdkit >/dev/null 2>&1 || skip "nbdkit is not installed"
	[ -f "$PLUGIN" ] || skip "the nbdkit plugin is not built ($PLUGIN)"
	nbdkit_preload || skip "ASan-built plugin and no libasan to preload into nbdkit"
}

front_ok() {
	_bk_fd=$1 _bk_fv=$2
	shift 2
	front "$_bk_fd" --dev "$_bk_fv" "$@" >>"$WORK/out" 2>&1 ||
		{ cat "$WORK/out"; bk_fail "rawfront $* on $_bk_fv failed"; }
}

have_fio_nbd() {
	command -v nbdkit >/dev/null 2>&1 && command -v fio >/dev/null 2>&1 && [ -f "$PLUGIN" ] &&
		fio --enghelp 2>/dev/null | grep -qw nbd && nbdkit_preload
}

need_fio_nbd() {
	have_fio_nbd || skip "needs nbdkit, the xbd nbdkit plugin (loadable) and fio with ioengine=nbd"
}
