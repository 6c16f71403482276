# tests/e2e/lib.sh: the end-to-end pieces shared by the fio matrix
# (matrix.sh) and the demo (demo.sh): a simulated host, xbd-back in dom0
# serving disk images, the guest's vbds exported over NBD by `nbdkit xbd`
# (run as the guest), fio (ioengine=nbd) against them, and the backend's
# counters for one disk.
#
#   e2e_need                      skip (77) unless every program is there
#   e2e_setup                     host + guest domain (E2E_DOMU) + WORK dir
#   e2e_disk VDEV FILE SIZE [xbd-sim disk add options]   prints the devid
#   e2e_back_start [xbd-back options] / e2e_back_stop [SIGNAL]
#   e2e_nbd_start NAME VDEV [plugin params] [-- nbdkit options]
#                                 nbdkit as the guest on $WORK/NAME.sock;
#                                 e2e_uri NAME prints its NBD URI; returns
#                                 1 (log on stderr) if it does not serve
#   e2e_nbd_stop NAME
#   e2e_fio NAME JOBFILE [fio options]   fio --output-format=json into
#                                 $WORK/NAME.json (fails on a verify error,
#                                 and after E2E_FIO_TIMEOUT seconds, 300)
#   e2e_fio_summary NAME          "key=value ..." of that run (iops, bw, verify)
#   e2e_stats DEVID               the backend's counters for domain
#                                 E2E_DOMU's DEVID, summed over its rings,
#                                 as "key=value" lines (plus rings=N)
#   e2e_stat KEY                  one value from the last e2e_stats output
#                                 (xbdctl adds protocol, grants, cache,
#                                 readonly, ring_pages: what was negotiated;
#                                 rings_busy: rings that carried requests)

. "$top_srcdir/tests/lib/sim.sh"

E2E_BACK="$top_builddir/blkback/xbd-back"
E2E_XBDCTL="$top_builddir/blkback/xbdctl"
E2E_PLUGIN="$top_builddir/blkfront/.libs/nbdkit-xbd-plugin.so"
E2E_DOMU=1
E2E_BACK_PID=
E2E_NBDKIT_ENV=
E2E_LAST_STATS=
WORK=

e2e_need() {
	sim_need sim/xbd-sim xenstore/xbd-xenstored blkback/xbd-back
	[ -f "$E2E_PLUGIN" ] || skip "the nbdkit plugin is not built ($E2E_PLUGIN)"
	for _e2e_p in fio nbdkit nbdinfo xenstore-read python3; do
		command -v "$_e2e_p" >/dev/null 2>&1 || skip "$_e2e_p is not installed"
	done
	fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd engine"
	# An ASan-built plugin needs libasan preloaded into nbdkit (not into fio).
	if nm -D "$E2E_PLUGIN" 2>/dev/null | grep -q __asan_init; then
		_e2e_asan=$(gcc -print-file-name=libasan.so)
		[ -f "$_e2e_asan" ] || skip "ASan-built plugin and no libasan to preload into nbdkit"
		E2E_NBDKIT_ENV="LD_PRELOAD=$_e2e_asan ASAN_OPTIONS=detect_leaks=0"
	fi
}

# e2e_kill_wait PID [SECS]: SIGTERM, then SIGKILL if PID has not exited
# after SECS (10) seconds (a frontend stuck on hung I/O must not hang the
# test); returns 1 (with a line on stderr) when SIGKILL was needed.
e2e_kill_wait() {
	kill "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
	_e2e_end=$(( $(date +%s) + ${2:-10} ))
	while kill -0 "$1" 2>/dev/null; do
		if [ "$(date +%s)" -ge "$_e2e_end" ]; then
			echo "e2e: pid $1 ($(ps -o args= -p "$1" | cut -c1-60)) ignored SIGTERM for ${2:-10} s: SIGKILL" >&2
			kill -KILL "$1" 2>/dev/null
			wait "$1" 2>/dev/null
			return 1
		fi
		sleep 0.1
	done
	wait "$1" 2>/dev/null
	return 0
}

e2e_fail() {
	if [ -n "$WORK" ] && [ -s "$WORK/xbd-back.log" ]; then
		echo "--- xbd-back log (last lines):" >&2
		tail -n 30 "$WORK/xbd-back.log" >&2
	fi
	for _e2e_l in "$WORK"/nbdkit-*.log; do
		[ -s "$_e2e_l" ] || continue
		echo "--- $_e2e_l:" >&2
		tail -n 10 "$_e2e_l" >&2
	done
	fail "$@"
}

e2e_setup() {
	sim_start
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-e2e.XXXXXXXX") || fail "mktemp failed"
	sim_on_exit "rm -rf '$WORK'"
	: >"$WORK/xbd-back.log"
	( sim_env 0; "$XBD_SIM" domain create "$SIMDIR" "$E2E_DOMU" --name guest >/dev/null ) ||
		fail "xbd-sim domain create failed"
}

# xs CMD ARGS...: a xenstore-CMD as dom0.
e2e_xs() {
	( _e2e_c=$1; shift; sim_env 0; exec "xenstore-$_e2e_c" "$@" )
}

e2e_disk() {
	_e2e_vdev=$1 _e2e_file=$2 _e2e_size=$3
	shift 3
	[ -e "$_e2e_file" ] || truncate -s "$_e2e_size" "$_e2e_file" || fail "cannot create $_e2e_file"
	( sim_env 0; "$XBD_SIM" disk add "$SIMDIR" "$E2E_DOMU" "$_e2e_vdev" "$_e2e_file" "$@" ) ||
		fail "xbd-sim disk add $_e2e_vdev failed"
}

e2e_back_state() {
	e2e_xs read "/local/domain/0/backend/vbd/$E2E_DOMU/$1/state" 2>/dev/null
}

_e2e_back_state_is() {
	[ "$(e2e_back_state "$1")" = "$2" ]
}

# e2e_wait_state DEVID STATE [SECS]
e2e_wait_state() {
	sim_wait_for "${3:-10}" _e2e_back_state_is "$1" "$2"
}

# The daemons run in a session of their own (setsid): a Ctrl-C at the
# terminal then reaches only the script and fio, and the script's exit trap
# stops the daemons in order (the guest's nbdkit first, while xbd-back can
# still answer its Closing/Closed handshake, then xbd-back, then the host).
E2E_SETSID=
command -v setsid >/dev/null 2>&1 && E2E_SETSID=setsid

e2e_back_start() {
	( sim_env 0; exec $E2E_SETSID "$E2E_BACK" "$@" ) >>"$WORK/xbd-back.log" 2>&1 &
	E2E_BACK_PID=$!
	sim_on_exit "e2e_kill_wait $E2E_BACK_PID"
}

# Returns xbd-back's exit status (0 after a clean SIGTERM).
e2e_back_stop() {
	[ -n "$E2E_BACK_PID" ] || return 0
	kill "-${1:-TERM}" "$E2E_BACK_PID" 2>/dev/null
	_e2e_end=$(( $(date +%s) + 20 ))
	while kill -0 "$E2E_BACK_PID" 2>/dev/null && [ "$(date +%s)" -lt "$_e2e_end" ]; do
		sleep 0.1
	done
	if kill -0 "$E2E_BACK_PID" 2>/dev/null; then
		echo "e2e: xbd-back did not exit within 20 s of SIG${1:-TERM}: SIGKILL" >&2
		kill -KILL "$E2E_BACK_PID"
	fi
	wait "$E2E_BACK_PID"
	_e2e_rc=$?
	E2E_BACK_PID=
	return $_e2e_rc
}

e2e_uri() {
	echo "nbd+unix:///?socket=$WORK/$1.sock"
}

_e2e_nbd_ready() {
	timeout -k 2 10 nbdinfo --size "$(e2e_uri "$1")" >/dev/null 2>&1
}

# e2e_nbd_start NAME VDEV [plugin params...] [-- nbdkit options...]
e2e_nbd_start() {
	_e2e_name=$1 _e2e_vdev=$2
	shift 2
	_e2e_params=
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		_e2e_params="$_e2e_params $1"
		shift
	done
	[ "${1:-}" = -- ] && shift
	rm -f "$WORK/$_e2e_name.sock" "$WORK/$_e2e_name.pid"
	# nbdkit runs as the guest: the plugin attaches to the guest's
	# device/vbd/<devid> through the guest's own xenstore connection.
	# shellcheck disable=SC2086
	( sim_env "$E2E_DOMU"; exec $E2E_SETSID env $E2E_NBDKIT_ENV nbdkit -f -U "$WORK/$_e2e_name.sock" \
		-P "$WORK/$_e2e_name.pid" "$@" "$E2E_PLUGIN" vdev="$_e2e_vdev" $_e2e_params ) \
		>>"$WORK/nbdkit-$_e2e_name.log" 2>&1 &
	eval "E2E_NBD_PID_$(_e2e_var "$_e2e_name")=$!"
	sim_on_exit "e2e_kill_wait $!"
	sim_wait_for 20 _e2e_nbd_ready "$_e2e_name" && return 0
	echo "nbdkit xbd vdev=$_e2e_vdev did not start serving:" >&2
	tail -n 5 "$WORK/nbdkit-$_e2e_name.log" >&2
	return 1
}

# A shell variable name made of NAME.
_e2e_var() {
	echo "$1" | tr -c 'A-Za-z0-9_\n' _
}

e2e_nbd_stop() {
	_e2e_v=$(_e2e_var "$1")
	eval "_e2e_pid=\${E2E_NBD_PID_$_e2e_v:-}"
	[ -n "$_e2e_pid" ] || return 0
	eval "E2E_NBD_PID_$_e2e_v="
	e2e_kill_wait "$_e2e_pid"
}

# e2e_fio NAME JOBFILE [fio options...]: NBDURI is the export NAME.
e2e_fio() {
	_e2e_name=$1 _e2e_job=$2
	shift 2
	# a hung request must fail the run, not hang it (status 124)
	NBDURI=$(e2e_uri "$_e2e_name") timeout --foreground -k 5 "${E2E_FIO_TIMEOUT:-300}" \
		fio --output-format=json --output="$WORK/$_e2e_name.json" \
		"$@" "$_e2e_job" >"$WORK/$_e2e_name.fio-stderr" 2>&1
	_e2e_rc=$?
	[ "$_e2e_rc" != 124 ] && [ "$_e2e_rc" != 137 ] ||
		echo "fio: no progress for ${E2E_FIO_TIMEOUT:-300} s (I/O hung?): killed" >>"$WORK/$_e2e_name.fio-stderr"
	E2E_FIO_RC=$_e2e_rc # 128 and above: fio was interrupted (Ctrl-C)
	python3 - "$WORK/$_e2e_name.json" >"$WORK/$_e2e_name.summary" <<'PY' || _e2e_rc=1
import json, sys
text = open(sys.argv[1]).read()
# fio may print notes before the JSON document
r = json.loads(text[text.index("{"):])
jobs = r["jobs"]
def tot(d, k):
    return sum(j[d][k] for j in jobs)
err = sum(j["error"] for j in jobs)
rd_iops, wr_iops = tot("read", "iops"), tot("write", "iops")
rd_bw, wr_bw = tot("read", "bw_bytes"), tot("write", "bw_bytes")
rd_b, wr_b = tot("read", "io_bytes"), tot("write", "io_bytes")
tr_b = tot("trim", "io_bytes")
print("read_iops=%.0f write_iops=%.0f read_MiBps=%.1f write_MiBps=%.1f "
      "read_MiB=%.1f write_MiB=%.1f trim_MiB=%.1f errors=%d"
      % (rd_iops, wr_iops, rd_bw / 1048576, wr_bw / 1048576,
         rd_b / 1048576, wr_b / 1048576, tr_b / 1048576, err))
sys.exit(1 if err else 0)
PY
	if [ "$_e2e_rc" != 0 ]; then
		echo "--- fio $_e2e_job failed (status $_e2e_rc):" >&2
		tail -n 20 "$WORK/$_e2e_name.fio-stderr" >&2
		return 1
	fi
	return 0
}

e2e_fio_summary() {
	cat "$WORK/$1.summary"
}

# The backend's counters of domain E2E_DOMU's DEVID, summed over its rings,
# as flat "key=value" lines named like the SIGUSR1 dump (rd_req, wr_req,
# f_req, ds_req, barrier_req, rd_sect, wr_sect, errors, grant_map, ...,
# rings).  From `xbdctl --json stats` when xbdctl is built (a failure of
# xbdctl is then a failure, not hidden), else from xbd-back's SIGUSR1 dump.
# E2E_STATS=sigusr1 forces the SIGUSR1 path (to cross-check the two).
e2e_stats() {
	if [ -x "$E2E_XBDCTL" ] && [ "${E2E_STATS:-}" != sigusr1 ]; then
		E2E_LAST_STATS=$( (sim_env 0; exec "$E2E_XBDCTL" --json stats "$E2E_DOMU/$1") |
			python3 -c '
import json, sys
r = json.load(sys.stdin)
devs = r["devices"]
assert len(devs) == 1, "expected one device, got %d" % len(devs)
d = devs[0]
s = d["stats"]
q, e, g = s["requests"], s["errors"], s["grants"]
flat = [
    ("rd_req", q["read"]), ("wr_req", q["write"]), ("f_req", q["flush"]),
    ("ds_req", q["discard"]), ("barrier_req", q["barrier"]),
    ("oo_req", s["out_of_slot_waits"]),
    ("rd_sect", s["sectors"]["read"]), ("wr_sect", s["sectors"]["written"]),
    ("errors", e["invalid"]), ("grant_errors", e["grant"]), ("io_errors", e["io"]),
    ("io_submit", s["io_submit"]["calls"]), ("submitted", s["io_submit"]["iocbs"]),
    ("reaped", s["completions"]["reaped"]), ("reap_calls", s["completions"]["reap_calls"]),
    ("grant_map", g["map_calls"]), ("grant_copy", g["copy_calls"]),
    ("grant_unmap", g["unmap_calls"]), ("persistent_hits", g["persistent_hits"]),
    ("persistent_misses", g["persistent_misses"]),
    ("notify_sent", s["notifications"]["sent"]), ("notify_recv", s["notifications"]["received"]),
    ("poll_hits", s["poll"]["hits"]), ("poll_misses", s["poll"]["misses"]),
    ("poll_ns", s["poll"]["ns"]), ("rings", len(d["rings"])),
]
for k, v in flat:
    print("%s=%d" % (k, v))
# what the backend negotiated (xbdctl only)
print("protocol=%s" % d.get("protocol"))
print("grants=%s" % d.get("grants"))
print("cache=%s" % d.get("settings", {}).get("cache"))
print("readonly=%d" % bool(d.get("readonly")))
print("ring_pages=%s" % ",".join(str(x.get("ring_pages")) for x in d["rings"]))
busy = [x for x in d["rings"] if sum(x["stats"]["requests"].values())]
print("rings_busy=%d" % len(busy))
') || { echo "xbdctl --json stats $E2E_DOMU/$1 failed" >&2; return 1; }
		echo "$E2E_LAST_STATS"
		return 0
	fi
	e2e_stats_sigusr1 "$1"
}

# The same from xbd-back's SIGUSR1 dump (lines "xbd-back: vbd D/DEVID[ queue N]: key=value ...").
e2e_stats_sigusr1() {
	[ -n "$E2E_BACK_PID" ] || return 1
	_e2e_dev="vbd $E2E_DOMU/$1"
	_e2e_before=$(wc -l <"$WORK/xbd-back.log")
	kill -USR1 "$E2E_BACK_PID" || return 1
	sim_wait_for 5 sh -c "tail -n +$((_e2e_before + 1)) '$WORK/xbd-back.log' |
		grep -q '^xbd-back: ${_e2e_dev}[ :].*poll_ns='" || return 1
	sleep 0.1 # the rest of the dump (other rings) is written by then
	E2E_LAST_STATS=$(tail -n +$((_e2e_before + 1)) "$WORK/xbd-back.log" |
		awk -v dev="$_e2e_dev" '
		index($0, "xbd-back: " dev ":") == 1 || index($0, "xbd-back: " dev " queue ") == 1 {
			name = $0; sub(/^xbd-back: /, "", name); sub(/:.*/, "", name)
			rings[name] = 1
			for (i = 1; i <= NF; i++)
				if (split($i, kv, "=") == 2 && kv[2] ~ /^[0-9]+$/) {
					if (!(kv[1] in sum)) order[n++] = kv[1]
					sum[kv[1]] += kv[2]
				}
		}
		END {
			for (i = 0; i < n; i++) print order[i] "=" sum[order[i]]
			nr = 0; for (r in rings) nr++
			print "rings=" nr
		}')
	echo "$E2E_LAST_STATS"
}

e2e_stat() {
	echo "$E2E_LAST_STATS" | sed -n "s/^$1=//p"
}
