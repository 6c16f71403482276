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
#                                 e2e_uri NAME prints its NBD URI
#   e2e_nbd_stop NAME
#   e2e_fio NAME JOBFILE [fio options]   fio --output-format=json into
#                                 $WORK/NAME.json (fails on a verify error)
#   e2e_fio_summary NAME          "key=value ..." of that run (iops, bw, verify)
#   e2e_stats DEVID               the backend's counters for domain
#                                 E2E_DOMU's DEVID, summed over its rings,
#                                 as "key=value" lines (plus rings=N)
#   e2e_stat KEY                  one value from the last e2e_stats output

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

e2e_back_start() {
	( sim_env 0; exec "$E2E_BACK" "$@" ) >>"$WORK/xbd-back.log" 2>&1 &
	E2E_BACK_PID=$!
	sim_on_exit "kill $E2E_BACK_PID; wait $E2E_BACK_PID"
}

# Returns xbd-back's exit status (0 after a clean SIGTERM).
e2e_back_stop() {
	[ -n "$E2E_BACK_PID" ] || return 0
	kill "-${1:-TERM}" "$E2E_BACK_PID" 2>/dev/null
	wait "$E2E_BACK_PID"
	_e2e_rc=$?
	E2E_BACK_PID=
	return $_e2e_rc
}

e2e_uri() {
	echo "nbd+unix:///?socket=$WORK/$1.sock"
}

_e2e_nbd_ready() {
	nbdinfo --size "$(e2e_uri "$1")" >/dev/null 2>&1
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
	( sim_env "$E2E_DOMU"; exec env $E2E_NBDKIT_ENV nbdkit -f -U "$WORK/$_e2e_name.sock" \
		-P "$WORK/$_e2e_name.pid" "$@" "$E2E_PLUGIN" vdev="$_e2e_vdev" $_e2e_params ) \
		>>"$WORK/nbdkit-$_e2e_name.log" 2>&1 &
	eval "E2E_NBD_PID_$_e2e_name=$!"
	sim_on_exit "kill $! ; wait $!"
	sim_wait_for 20 _e2e_nbd_ready "$_e2e_name" ||
		e2e_fail "nbdkit xbd vdev=$_e2e_vdev did not start serving"
}

e2e_nbd_stop() {
	eval "_e2e_pid=\${E2E_NBD_PID_$1:-}"
	[ -n "$_e2e_pid" ] || return 0
	kill "$_e2e_pid" 2>/dev/null
	wait "$_e2e_pid" 2>/dev/null
	eval "E2E_NBD_PID_$1="
}

# e2e_fio NAME JOBFILE [fio options...]: NBDURI is the export NAME.
e2e_fio() {
	_e2e_name=$1 _e2e_job=$2
	shift 2
	NBDURI=$(e2e_uri "$_e2e_name") fio --output-format=json --output="$WORK/$_e2e_name.json" \
		"$@" "$_e2e_job" >"$WORK/$_e2e_name.fio-stderr" 2>&1
	_e2e_rc=$?
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

# Sum the counters of every ring of domain E2E_DOMU's DEVID from xbd-back's
# SIGUSR1 dump (lines "xbd-back: vbd D/DEVID[ queue N]: key=value ...").
e2e_stats() {
	[ -n "$E2E_BACK_PID" ] || return 1
	_e2e_dev="vbd $E2E_DOMU/$1"
	_e2e_before=$(wc -l <"$WORK/xbd-back.log")
	kill -USR1 "$E2E_BACK_PID" || return 1
	sim_wait_for 5 sh -c "tail -n +$((_e2e_before + 1)) '$WORK/xbd-back.log' |
		grep -q '^xbd-back: $_e2e_dev[ :].*poll_ns='" || return 1
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
