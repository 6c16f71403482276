# tests/e2e/lib.sh: the end-to-end pieces shared by the fio matrix
# (matrix.sh) and the demo (demo.sh), on top of tests/lib/xbd.sh (which
# starts the host and xbd-back: start_back, stop_back, add_disk, xs,
# state_is, bk_fail ...; see tests/README.md): the guest's vbds exported
# over NBD by `nbdkit xbd` (run as the guest), fio (ioengine=nbd) against
# them, and the backend's counters for one disk.
#
#   e2e_need                      skip (77) unless every program is there
#   e2e_setup                     host + guest domain DOMU (1, "guest") + WORK
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
#                                 DOMU's DEVID, summed over its rings,
#                                 as "key=value" lines (plus rings=N)
#   e2e_stat KEY                  one value from the last e2e_stats output
#                                 (xbdctl adds protocol, grants, cache,
#                                 readonly, ring_pages: what was negotiated;
#                                 rings_busy: rings that carried requests)

. "$top_srcdir/tests/lib/xbd.sh"

DOMU=1
E2E_LAST_STATS=

e2e_need() {
	bk_need blkback/xbd-back
	need_fio_nbd
	for _e2e_p in nbdinfo python3; do
		command -v "$_e2e_p" >/dev/null 2>&1 || skip "$_e2e_p is not installed"
	done
}

e2e_setup() {
	bk_setup blkback/xbd-back
	new_domain "$DOMU" --name guest >/dev/null
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
	( sim_env "$DOMU"; exec $BK_SETSID env $NBDKIT_PRELOAD nbdkit -f -U "$WORK/$_e2e_name.sock" \
		-P "$WORK/$_e2e_name.pid" "$@" "$PLUGIN" vdev="$_e2e_vdev" $_e2e_params ) \
		>>"$WORK/nbdkit-$_e2e_name.log" 2>&1 &
	eval "E2E_NBD_PID_$(_e2e_var "$_e2e_name")=$!"
	sim_on_exit "stop_pid $! TERM 10"
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
	stop_pid "$_e2e_pid" TERM 10
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

# The backend's counters of domain DOMU's DEVID, summed over its rings,
# as flat "key=value" lines named like the SIGUSR1 dump (rd_req, wr_req,
# f_req, ds_req, barrier_req, rd_sect, wr_sect, errors, grant_map, ...,
# rings).  From `xbdctl --json stats` when xbdctl is built (a failure of
# xbdctl is then a failure, not hidden), else from xbd-back's SIGUSR1 dump.
# E2E_STATS=sigusr1 forces the SIGUSR1 path (to cross-check the two).
e2e_stats() {
	if [ -x "$XBDCTL" ] && [ "${E2E_STATS:-}" != sigusr1 ]; then
		E2E_LAST_STATS=$( (sim_env 0; exec "$XBDCTL" --json stats "$DOMU/$1") |
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
print("engine=%s" % d.get("engine"))
print("page_cache=%d" % bool(d.get("page_cache")))
print("ring_pages=%s" % ",".join(str(x.get("ring_pages")) for x in d["rings"]))
busy = [x for x in d["rings"] if sum(x["stats"]["requests"].values())]
print("rings_busy=%d" % len(busy))
') || { echo "xbdctl --json stats $DOMU/$1 failed" >&2; return 1; }
		echo "$E2E_LAST_STATS"
		return 0
	fi
	e2e_stats_sigusr1 "$1"
}

# The same from xbd-back's SIGUSR1 dump (lines "xbd-back: vbd D/DEVID[ queue N]: key=value ...").
e2e_stats_sigusr1() {
	[ -n "$BACK_PID" ] || return 1
	_e2e_dev="vbd/$DOMU/$1"
	_e2e_before=$(wc -l <"$LOG")
	kill -USR1 "$BACK_PID" || return 1
	sim_wait_for 5 sh -c "tail -n +$((_e2e_before + 1)) '$LOG' |
		grep -q '^xbd-back: ${_e2e_dev}[ :].*poll_ns='" || return 1
	sleep 0.1 # the rest of the dump (other rings) is written by then
	E2E_LAST_STATS=$(tail -n +$((_e2e_before + 1)) "$LOG" |
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
