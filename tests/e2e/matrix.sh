#!/bin/sh
# tests/e2e/matrix.sh: the end-to-end fio matrix.  One simulated host, one
# xbd-back in dom0 with a per-disk rule (--disk) for each row's image, and
# for each row: a fresh disk image attached to guest domain 1, `nbdkit xbd`
# running as the guest with the row's frontend options, and real fio
# (ioengine=nbd, verify=crc32c) against it.  Each row also checks what the
# backend counted for its disk, so a row fails when the feature it names was
# not actually used.
#
#   matrix.sh [--long] [--list] [ROW...]     (default: every row)
#
# Short mode (make check): 8 MiB per row, timed jobs capped at 1 s.
# --long or E2E_LONG=1 (make check-long): 256 MiB, 10 s.
# The table of results goes to stdout and, if E2E_REPORT is set, is
# appended to that file.  Exit 0 when every row passed, 1 otherwise.

: "${top_srcdir:?top_srcdir must be set (run through make check)}"
. "$top_srcdir/tests/e2e/lib.sh"

# The rows the uring engine (engine = uring) runs again: every row aio
# passes whose storage is a file (uring-ROW is ROW with engine = uring).
URING_ROWS="uring-rand4k uring-seq1m uring-flush uring-fua uring-fua-barrier uring-trim
uring-readonly uring-grant-copy uring-cache-writethrough uring-restart-io"
# The rows run again through dom0's page cache (direct = 0; pcache-ROW is
# ROW with direct = 0): data, flush, FUA, trim, writethrough and a restart
# under I/O, whose re-executed requests meet what the cache already holds.
PCACHE_ROWS="pcache-rand4k pcache-flush pcache-fua pcache-trim pcache-cache-writethrough
pcache-restart-io"

ALL_ROWS="rand4k seq1m flush fua fua-barrier trim multiqueue ring-order0 ring-order4
abi32 abi64 persistent-on persistent-off grant-map grant-copy
cache-writeback cache-writethrough cache-unsafe readonly reattach restart restart-io
nbd-verify nbd-flush nbd-fua nbd-trim nbd-readonly nbd-outage
rbd-verify rbd-flush rbd-fua rbd-trim rbd-resize rbd-snapshot
$URING_ROWS $PCACHE_ROWS"

long=${E2E_LONG:-0}
rows=
while [ $# -gt 0 ]; do
	case $1 in
	--long) long=1 ;;
	--list) echo $ALL_ROWS; exit 0 ;;
	-*) echo "usage: matrix.sh [--long] [--list] [ROW...]" >&2; exit 2 ;;
	*) rows="$rows $1" ;;
	esac
	shift
done
[ -n "$rows" ] || rows=$ALL_ROWS
for r in $rows; do
	case " $(echo $ALL_ROWS) " in
	*" $r "*) ;;
	*) echo "matrix.sh: unknown row '$r' (rows: $(echo $ALL_ROWS))" >&2; exit 2 ;;
	esac
done

if [ "$long" = 1 ]; then
	SIZE=256m RT=10
	: "${E2E_FIO_TIMEOUT:=120}"
else
	SIZE=8m RT=1
	: "${E2E_FIO_TIMEOUT:=60}"
fi
export E2E_FIO_TIMEOUT

e2e_need
e2e_setup
# nbdkit's qemu-io/nbdcopy helpers are optional extras; fio is the judge.
HAVE_QEMU_IO=0
command -v qemu-io >/dev/null 2>&1 && HAVE_QEMU_IO=1

TABLE="$WORK/table"
: >"$TABLE"
FAILED=

# The backend's per-disk settings of each row (xbd-back --disk PARAMS:...).
rule_of() {
	case $1 in
	uring-*) _r=$(rule_of "${1#uring-}"); echo "engine=uring${_r:+,$_r}" ;;
	pcache-*) _r=$(rule_of "${1#pcache-}"); echo "direct=0${_r:+,$_r}" ;;
	multiqueue) echo max-queues=4 ;;
	fua-barrier) echo barrier=1 ;;
	persistent-on) echo persistent=1 ;;
	persistent-off) echo persistent=0,grants=map ;;
	grant-copy) echo grant-copy=1 ;;
	cache-writeback) echo cache=writeback ;;
	cache-writethrough) echo cache=writethrough ;;
	cache-unsafe) echo cache=unsafe ;;
	nbd-fua) echo cache=writethrough ;;
	nbd-outage) echo nbd-retry-ms=200 ;;
	esac
}

# What a row's rule matches: its image, or its storage server's socket.
rule_target() {
	case $1 in
	nbd-*) echo "*srv-$1.sock" ;;
	rbd-*) echo "rbd:rbd/$1:*" ;;
	*) echo "$WORK/$1.img" ;;
	esac
}

# mkjob FILE LINE...: a fio job file for ioengine=nbd on ${NBDURI}.
mkjob() {
	_f=$1
	shift
	{
		echo "[global]"
		echo "ioengine=nbd"
		echo "uri=\${NBDURI}"
		echo "size=$SIZE"
		echo "verify_fatal=1"
		for _l; do echo "$_l"; done
	} >"$_f"
}

# The verifying write-then-read job: every block written, then read back
# and checked (crc32c header per block, with its offset).
verify_job() { # FILE BS RW [extra lines]
	_f=$1 _bs=$2 _rw=$3
	shift 3
	mkjob "$_f" "[verify-$_rw-$_bs]" "rw=$_rw" "bs=$_bs" "iodepth=16" \
		"verify=crc32c" "do_verify=1" "$@"
}

# Timed mixed job: 70% reads, 30% writes, every read of a written block
# verified (fio keeps the written blocks' checksums).  The short matrix runs
# it only in the rows about throughput (SHORT_MIXED); returns 1 when skipped.
SHORT_MIXED="rand4k multiqueue ring-order4"
mixed_job() { # FILE BS [extra lines]
	_f=$1 _bs=$2
	shift 2
	[ "$long" = 1 ] || case " $SHORT_MIXED " in *" $ROW "*) ;; *) return 1 ;; esac
	mkjob "$_f" "[randrw-$_bs]" "rw=randrw" "rwmixread=70" "bs=$_bs" "iodepth=16" \
		"runtime=$RT" "time_based=1" "$@"
}

# Per-row state.
ROW='' DEV='' IMG='' NOTE=''

row_fail() {
	echo "row $ROW: FAIL: $*" >&2
	ROW_OK=0
}

# verify_only FILE: the job FILE replayed without writing, checking every
# block it wrote earlier (fio verify_only); prints the new job file.
verify_only() {
	sed 's/^do_verify=0$/do_verify=1/; /^\[global\]$/!s/^\[\(.*\)\]$/[\1-verify-only]/' "$1" >"${1%.fio}-vo.fio"
	echo "verify_only=1" >>"${1%.fio}-vo.fio"
	echo "${1%.fio}-vo.fio"
}

# run_fio JOBFILE [fio options]: fio on this row's export, one table line per job.
run_fio() {
	if e2e_fio "$ROW" "$@"; then
		_v="OK"
	else
		_v="FAILED"
		row_fail "fio $(basename "$1") failed"
	fi
	python3 - "$WORK/$ROW.json" "$ROW" "$_v" >>"$WORK/$ROW.lines" <<'PY'
import json, sys
path, row, status = sys.argv[1:4]
try:
    text = open(path).read()
    r = json.loads(text[text.index("{"):])
except Exception:
    print("%s|-|-|-|-|fio output missing" % row)
    sys.exit(0)
for j in r["jobs"]:
    rd, wr, tr = j["read"], j["write"], j["trim"]
    mib = lambda d: d["bw_bytes"] / 1048576
    # the verify phase of a write job shows up as its reads
    iops = "%.0f/%.0f" % (rd["iops"], wr["iops"])
    bw = "%.1f/%.1f" % (mib(rd), mib(wr))
    if tr["io_bytes"]:
        iops, bw = "trim %.0f" % tr["iops"], "trim %.1f" % mib(tr)
    print("%s|%s|%s|%s|%s" % (row, j["jobname"], iops, bw,
          status if not j["error"] else "error %d" % j["error"]))
PY
}

# expect_stat KEY OP VALUE: a backend counter of this row's disk.
expect_stat() {
	_v=$(e2e_stat "$1")
	[ -n "$_v" ] || { row_fail "backend counter $1 missing"; return; }
	case $2 in
	-eq) [ "$_v" -eq "$3" ] ;;
	-gt) [ "$_v" -gt "$3" ] ;;
	*) false ;;
	esac || row_fail "backend $1=$_v, expected $2 $3"
}

# expect_info KEY VALUE: what xbdctl says the backend negotiated (skipped
# when only the SIGUSR1 counters are available).
expect_info() {
	_v=$(e2e_stat "$1")
	[ -z "$_v" ] || [ "$_v" = "$2" ] || row_fail "backend (xbdctl) $1=$_v, expected $2"
}

# front_key KEY: a key of the guest's frontend directory (as dom0).
front_key() {
	xs read "/local/domain/$DOMU/device/vbd/$DEV/$1" 2>/dev/null
}

# stats: snapshot this row's backend counters; fail the row on any error count.
stats() {
	e2e_stats "$DEV" >"$WORK/$ROW.stats" || { row_fail "no backend counters for $DEV"; return; }
	expect_stat errors -eq 0
	expect_stat grant_errors -eq 0
	expect_stat io_errors -eq 0
}

# counters NAME...: "name=value ..." of the last snapshot, for the table.
counters() {
	for _k; do printf '%s=%s ' "$_k" "$(e2e_stat "$_k")"; done
}

attach() { # [xbd-sim disk add options]
	if [ -n "$PARAMS" ]; then
		# storage an engine reaches (NBD, RBD): params is no file to create
		DEV=$(add_disk "$DOMU" "$DEV" "$PARAMS" "$@") || { row_fail "xbd-sim disk add failed"; return 1; }
	else
		DEV=$(new_disk "$IMG" "$SIZE" && add_disk "$DOMU" "$DEV" "$IMG" "$@") ||
			{ row_fail "xbd-sim disk add failed"; return 1; }
	fi
	ATTACHED=1
	sim_wait_for 10 state_is "$DOMU" "$DEV" 2 || { row_fail "xbd-back did not reach InitWait"; return 1; }
}

# up [xbd-sim disk add options] [-- plugin params [-- nbdkit options]]:
# attach the row's disk and start its NBD export.
up() {
	_add=
	while [ $# -gt 0 ] && [ "$1" != -- ]; do _add="$_add $1"; shift; done
	[ "${1:-}" = -- ] && shift
	# shellcheck disable=SC2086
	attach $_add || return 1
	e2e_nbd_start "$ROW" "$DEV" "$@" || { row_fail "nbdkit did not start"; return 1; }
}

detach() {
	[ "$ATTACHED" = 1 ] || return 0
	ATTACHED=0
	e2e_nbd_stop "$ROW"
	"$XBD_SIM" disk remove "$SIMDIR" "$DOMU" "$DEV" >/dev/null 2>&1 ||
		row_fail "xbd-sim disk remove: the backend did not reach Closed"
}

# ---- the rows -------------------------------------------------------------

row_rand4k() {
	NOTE="4k random I/O, iodepth 16"
	up || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "verify=crc32c" &&
		run_fio "$WORK/$ROW-2.fio"
	stats
	expect_stat rd_req -gt 0
	expect_stat wr_req -gt 0
	NOTE="$NOTE; $(counters rd_req wr_req rings)"
}

row_seq1m() {
	NOTE="1 MiB sequential, 256 indirect segments"
	up -- indirect=256 || return
	verify_job "$WORK/$ROW-1.fio" 1m write
	run_fio "$WORK/$ROW-1.fio"
	mkjob "$WORK/$ROW-2.fio" "[seqread-1m]" "rw=read" "bs=1m" "iodepth=8" \
		"runtime=$RT" "time_based=1"
	run_fio "$WORK/$ROW-2.fio"
	stats
	# without indirect descriptors a request carries at most 11 pages (88 sectors)
	_wr=$(e2e_stat wr_req) _ws=$(e2e_stat wr_sect)
	[ "${_wr:-0}" -gt 0 ] && [ $((_ws / _wr)) -gt 88 ] ||
		row_fail "writes were not indirect: wr_req=$_wr wr_sect=$_ws"
	NOTE="$NOTE; sectors/write request=$((_ws / (_wr ? _wr : 1)))"
}

row_flush() {
	NOTE="4k random writes, flush every 8 (fsync=8)"
	up || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite "fsync=8"
	run_fio "$WORK/$ROW-1.fio"
	stats
	expect_stat f_req -gt 0
	NOTE="$NOTE; $(counters wr_req f_req)"
}

# FUA: fio's nbd engine never sets FUA itself, so nbdkit's fua filter
# (fuamode=force) turns each of fio's writes into a FUA write to the plugin
# (fio sends no flush: every flush the backend counts comes from FUA).
fua_fio() {
	up -- fuamode=force -- --filter=fua || return 1
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	stats
}

# Then qemu-io sends its own FUA writes (write -f) through a plain export
# (a vbd has one frontend: the filtered nbdkit goes first); what it wrote
# must read back.
fua_qemu() {
	[ "$HAVE_QEMU_IO" = 1 ] || return 0
	e2e_nbd_stop "$ROW"
	e2e_nbd_start "$ROW" "$DEV" || { row_fail "nbdkit did not start"; return; }
	timeout -k 5 "$E2E_FIO_TIMEOUT" qemu-io -f raw -c "write -f -P 0xa5 0 64k" -c "write -f -P 0x5a 1m 1m" \
		-c "read -P 0xa5 0 64k" -c "read -P 0x5a 1m 1m" "$(e2e_uri "$ROW")" \
		>"$WORK/$ROW.qio" 2>&1 && ! grep -q 'fail\|error' "$WORK/$ROW.qio" ||
		row_fail "qemu-io FUA writes or their read-back failed: $(cat "$WORK/$ROW.qio")"
	NOTE="$NOTE; qemu-io write -f + read -P: OK"
}

row_fua() {
	NOTE="4k random FUA writes (nbdkit --filter=fua fuamode=force)"
	fua_fio || return
	# feature-flush-cache: a FUA write reaches the backend as write + flush
	expect_stat f_req -gt 0
	NOTE="$NOTE; $(counters wr_req f_req)"
	fua_qemu
}

row_fua_barrier() {
	NOTE="FUA writes, disk in barrier mode (feature-barrier, no flush-cache)"
	fua_fio || return
	[ "$(xs read "/local/domain/0/backend/vbd/$DOMU/$DEV/feature-barrier" 2>/dev/null)" = 1 ] ||
		row_fail "the backend does not offer feature-barrier"
	# a FUA write is a WRITE_BARRIER with data
	expect_stat barrier_req -gt 0
	NOTE="$NOTE; $(counters wr_req barrier_req f_req)"
	fua_qemu
}

row_trim() {
	NOTE="write, trim everything (64k), read back zeros"
	up --discard-enable 1 || return
	verify_job "$WORK/$ROW-1.fio" 64k write
	run_fio "$WORK/$ROW-1.fio"
	_before=$(du -k "$IMG" | cut -f1)
	mkjob "$WORK/$ROW-2.fio" "[trim-64k]" "rw=trim" "bs=64k" "iodepth=16"
	run_fio "$WORK/$ROW-2.fio"
	_after=$(du -k "$IMG" | cut -f1)
	mkjob "$WORK/$ROW-3.fio" "[zeros-64k]" "rw=read" "bs=64k" "iodepth=16" \
		"verify=pattern" "verify_pattern=0" "do_verify=1"
	run_fio "$WORK/$ROW-3.fio"
	cmp -s -n "$(du -b --apparent-size "$IMG" | cut -f1)" "$IMG" /dev/zero ||
		row_fail "the image is not all zeros after trim"
	[ "$_after" -lt "$_before" ] || row_fail "trim freed no space: ${_before}k -> ${_after}k"
	stats
	expect_stat ds_req -gt 0
	NOTE="$NOTE; image ${_before}k -> ${_after}k allocated; $(counters ds_req)"
}

row_multiqueue() {
	NOTE="4 queues, 4 fio jobs = 4 NBD connections"
	up -- queues=4 || return
	[ "$(front_key multi-queue-num-queues)" = 4 ] ||
		row_fail "the frontend did not negotiate 4 queues ($(front_key multi-queue-num-queues))"
	# each job writes and verifies its own quarter of the disk
	mkjob "$WORK/$ROW-1.fio" "[verify-4x]" "rw=randwrite" "bs=4k" "iodepth=8" \
		"numjobs=4" "offset_increment=25%" "size=25%" "verify=crc32c" "do_verify=1" \
		"group_reporting=1"
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "numjobs=4" "group_reporting=1" &&
		run_fio "$WORK/$ROW-2.fio"
	stats
	expect_stat rings -eq 4
	expect_info rings_busy 4
	NOTE="$NOTE; $(counters rings rings_busy wr_req rd_req)"
}

ring_row() { # ORDER
	NOTE="ring-order $1 ($((1 << $1)) page(s)), iodepth 64"
	up -- ring-order="$1" || return
	_o=$(front_key ring-page-order)
	[ "${_o:-0}" = "$1" ] || row_fail "the frontend wrote ring-page-order=${_o:-none}, not $1"
	verify_job "$WORK/$ROW-1.fio" 4k randwrite "iodepth=64"
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "iodepth=64" &&
		run_fio "$WORK/$ROW-2.fio"
	stats
	_p=$(e2e_stat ring_pages | tr , '\n' | sort -u)
	[ -z "$_p" ] || [ "$_p" = $((1 << $1)) ] || row_fail "backend rings have $_p pages"
	NOTE="$NOTE; $(counters rd_req wr_req)"
}
row_ring_order0() { ring_row 0; }
row_ring_order4() { ring_row 4; }

abi_row() { # PROTOCOL
	NOTE="protocol $1"
	up -- protocol="$1" || return
	[ "$(front_key protocol)" = "$1" ] || row_fail "the frontend wrote protocol=$(front_key protocol)"
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	verify_job "$WORK/$ROW-2.fio" 128k write
	run_fio "$WORK/$ROW-2.fio"
	stats
	expect_info protocol "$1"
	expect_stat wr_req -gt 0
	NOTE="$NOTE; $(counters rd_req wr_req)"
}
row_abi32() { abi_row x86_32-abi; }
row_abi64() { abi_row x86_64-abi; }

grant_row() { # MODE
	up || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "verify=crc32c" &&
		run_fio "$WORK/$ROW-2.fio"
	stats
}

row_persistent_on() {
	NOTE="persistent grants on"
	grant_row
	expect_stat persistent_hits -gt 0
	expect_info grants persistent
	NOTE="$NOTE; $(counters grant_map persistent_hits persistent_misses)"
}

row_persistent_off() {
	NOTE="persistent grants off, grants = map"
	grant_row
	expect_stat persistent_hits -eq 0
	expect_stat grant_unmap -gt 0
	expect_info grants map
	NOTE="$NOTE; $(counters grant_map grant_unmap persistent_hits)"
}

row_grant_map() {
	NOTE="grant map (default)"
	grant_row
	expect_stat grant_map -gt 0
	expect_stat grant_copy -eq 0
	NOTE="$NOTE; $(counters grant_map grant_copy)"
}

row_grant_copy() {
	NOTE="grant copy"
	grant_row
	expect_stat grant_copy -gt 0
	expect_stat grant_map -eq 0
	expect_info grants copy
	NOTE="$NOTE; $(counters grant_map grant_copy)"
}

cache_row() { # MODE
	NOTE="cache=$1, 4k random writes with fsync=8"
	up || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite "fsync=8"
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "fsync=8" "verify=crc32c" &&
		run_fio "$WORK/$ROW-2.fio"
	stats
	expect_stat f_req -gt 0
	expect_info cache "$1"
	NOTE="$NOTE; $(counters wr_req f_req)"
}
row_cache_writeback() { cache_row writeback; }
row_cache_writethrough() { cache_row writethrough; }
row_cache_unsafe() { cache_row unsafe; }

row_readonly() {
	NOTE="read-only disk (mode=r): data written beforehand verifies, writes refused"
	# fill the image directly with fio's verifiable blocks, then read them through xbd
	mkjob "$WORK/$ROW-fill.fio" "[seq-64k]" "rw=write" "bs=64k" "verify=crc32c" "do_verify=0"
	truncate -s "$SIZE" "$IMG"
	sed "s|^ioengine=nbd\$|ioengine=psync|; s|^uri=.*|filename=$IMG|" "$WORK/$ROW-fill.fio" >"$WORK/$ROW-file.fio"
	fio --output=/dev/null "$WORK/$ROW-file.fio" \
		>"$WORK/$ROW.fill" 2>&1 || { row_fail "filling the image failed"; return; }
	_sum=$(md5sum <"$IMG")
	up --mode r || return
	nbdinfo "$(e2e_uri "$ROW")" 2>/dev/null | grep -q 'is_read_only: true' ||
		row_fail "nbdinfo does not show a read-only export"
	run_fio "$(verify_only "$WORK/$ROW-fill.fio")"
	mkjob "$WORK/$ROW-2.fio" "[randread-4k]" "rw=randread" "bs=4k" "iodepth=16" \
		"runtime=$RT" "time_based=1"
	run_fio "$WORK/$ROW-2.fio"
	mkjob "$WORK/$ROW-w.fio" "[write]" "rw=write" "bs=4k" "size=64k"
	if NBDURI=$(e2e_uri "$ROW") fio --output=/dev/null "$WORK/$ROW-w.fio" >/dev/null 2>&1; then
		row_fail "fio could write to the read-only disk"
	fi
	[ "$(md5sum <"$IMG")" = "$_sum" ] || row_fail "the read-only image changed"
	stats
	expect_stat wr_req -eq 0
	expect_info readonly 1
	NOTE="$NOTE; $(counters rd_req wr_req)"
}

row_reattach() {
	NOTE="write; detach (xbd-sim disk remove) and re-attach; read back"
	up || return
	mkjob "$WORK/$ROW-1.fio" "[randwrite-4k]" "rw=randwrite" "bs=4k" "iodepth=16" \
		"verify=crc32c" "do_verify=0"
	run_fio "$WORK/$ROW-1.fio"
	stats
	detach
	cp --sparse=always "$IMG" "$WORK/$ROW.saved"
	up || return
	run_fio "$(verify_only "$WORK/$ROW-1.fio")"
	if command -v nbdcopy >/dev/null 2>&1; then
		timeout -k 5 "$E2E_FIO_TIMEOUT" nbdcopy "$(e2e_uri "$ROW")" "$WORK/$ROW.copy" ||
			row_fail "nbdcopy from the re-attached disk failed"
		cmp -s "$WORK/$ROW.copy" "$WORK/$ROW.saved" ||
			row_fail "the re-attached disk differs from the image saved at detach"
		rm -f "$WORK/$ROW.copy"
	fi
	rm -f "$WORK/$ROW.saved"
	stats
	expect_stat wr_req -eq 0
	expect_stat rd_req -gt 0
	NOTE="$NOTE; after re-attach: $(counters rd_req wr_req)"
}

row_restart() {
	NOTE="write; restart xbd-back (SIGTERM) under the attached guest; read back"
	up || return
	mkjob "$WORK/$ROW-1.fio" "[randwrite-4k]" "rw=randwrite" "bs=4k" "iodepth=16" \
		"verify=crc32c" "do_verify=0"
	run_fio "$WORK/$ROW-1.fio"
	stop_back TERM || row_fail "xbd-back did not exit 0 on SIGTERM"
	start_matrix_back
	# the same nbdkit (the guest's frontend) keeps its ring across the restart
	run_fio "$(verify_only "$WORK/$ROW-1.fio")"
	# and writes still work afterwards
	verify_job "$WORK/$ROW-2.fio" 64k randwrite "size=25%"
	run_fio "$WORK/$ROW-2.fio"
	stats
	if command -v nbdcopy >/dev/null 2>&1; then
		timeout -k 5 "$E2E_FIO_TIMEOUT" nbdcopy "$(e2e_uri "$ROW")" "$WORK/$ROW.copy" && cmp -s "$WORK/$ROW.copy" "$IMG" ||
			row_fail "after the restart the guest's disk and the image differ"
		rm -f "$WORK/$ROW.copy"
	fi
	expect_stat rd_req -gt 0
	NOTE="$NOTE; after restart: $(counters rd_req wr_req)"
}

row_restart_io() {
	NOTE="restart xbd-back while fio writes (I/O in flight); everything verifies"
	up || return
	# rate-limited so that the restart falls in the middle of the writes
	mkjob "$WORK/$ROW-1.fio" "[randwrite-across-restart]" "rw=randwrite" "bs=4k" \
		"iodepth=16" "size=16m" "rate_iops=2000" "verify=crc32c" "do_verify=1"
	( run_fio "$WORK/$ROW-1.fio"; [ "$ROW_OK" = 1 ] ) &
	_fio=$!
	sleep 0.7
	kill -0 "$_fio" 2>/dev/null || row_fail "fio ended before the restart"
	stop_back TERM || row_fail "xbd-back did not exit 0 on SIGTERM"
	start_matrix_back
	wait "$_fio" || row_fail "fio failed across the restart"
	stats
	expect_stat wr_req -gt 0
	NOTE="$NOTE; after restart: $(counters rd_req wr_req)"
}

# ---- the same rows on the uring engine -----------------------------------

# uring_row ROW: ROW's checks with engine = uring, and the engine says so.
uring_row() {
	"row_$(echo "$1" | tr - _)"
	[ "$ROW_OK" = 1 ] && [ "$ATTACHED" = 1 ] || return 0
	e2e_stats "$DEV" >/dev/null || return 0
	expect_info engine uring
	NOTE="$NOTE; engine=$(e2e_stat engine)"
}
for _r in $URING_ROWS; do
	eval "row_$(echo "$_r" | tr - _)() { uring_row ${_r#uring-}; }"
done

# ---- the same rows through dom0's page cache ---------------------------

# pcache_row ROW: ROW's checks with direct = 0, and the backend says the
# disk is read and written through the page cache.
pcache_row() {
	"row_$(echo "$1" | tr - _)"
	[ "$ROW_OK" = 1 ] && [ "$ATTACHED" = 1 ] || return 0
	e2e_stats "$DEV" >/dev/null || return 0
	# (the SIGUSR1 dump does not say: then only the row's own checks)
	expect_info page_cache 1
	NOTE="$NOTE; page cache${_v:+=$_v}"
}
for _r in $PCACHE_ROWS; do
	eval "row_$(echo "$_r" | tr - _)() { pcache_row ${_r#pcache-}; }"
done

# ---- rows on the NBD and RBD engines ---------------------------------------
#
# The backend's storage is an NBD server (nbdkit, qemu-storage-daemon) or
# an image in a throwaway Ceph cluster; the guest side is the same as in
# every row (nbdkit xbd + fio).  Each row checks the backend's counters
# and what the storage saw.

# srv_start KIND ARGS...: the row's storage server on $WORK/srv-$ROW.sock;
# PARAMS is its URI.  KIND nbdkit (ARGS: nbdkit plugin and params, logged
# to $WORK/srv-$ROW.nbd.log) or qsd (a fresh qcow2 of $SIZE).
srv_start() {
	_k=$1
	shift
	_s=$WORK/srv-$ROW.sock
	rm -f "$_s"
	case $_k in
	nbdkit)
		nbdkit -f -U "$_s" --filter=log "$@" logfile="$WORK/srv-$ROW.nbd.log" \
			>>"$WORK/srv-$ROW.log" 2>&1 &
		;;
	qsd)
		qemu-img create -q -f qcow2 "$WORK/$ROW.qcow2" "$SIZE" || { row_fail "qemu-img create"; return 1; }
		qemu-storage-daemon --blockdev driver=file,node-name=f,filename="$WORK/$ROW.qcow2" \
			--blockdev driver=qcow2,node-name=q,file=f \
			--nbd-server addr.type=unix,addr.path="$_s" \
			--export type=nbd,id=e,node-name=q,name=disk,writable=on >>"$WORK/srv-$ROW.log" 2>&1 &
		;;
	esac
	SRV_PID=$!
	sim_on_exit "stop_pid $SRV_PID TERM 10"
	sim_wait_for 10 test -S "$_s" || { row_fail "the $_k server did not start"; return 1; }
	PARAMS="nbd+unix:///?socket=$_s"
	[ "$_k" = qsd ] && PARAMS="nbd+unix:///disk?socket=$_s"
	return 0
}

srv_stop() {
	[ -n "${SRV_PID:-}" ] && stop_pid "$SRV_PID" TERM 10
	SRV_PID=
}

# srv_saw WORD: the NBD server's log (nbdkit --filter=log) has a WORD command.
srv_saw() {
	grep -q "$1" "$WORK/srv-$ROW.nbd.log" 2>/dev/null || row_fail "the NBD server saw no $1"
}

need_nbd_storage() {
	command -v qemu-storage-daemon >/dev/null 2>&1 || { NOTE="qemu-storage-daemon not installed: not run"; return 1; }
}

row_nbd_verify() {
	NOTE="qcow2 through qemu-storage-daemon, 4k random verify + mixed"
	need_nbd_storage || return
	srv_start qsd && up || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "verify=crc32c" && run_fio "$WORK/$ROW-2.fio"
	verify_job "$WORK/$ROW-3.fio" 1m write
	run_fio "$WORK/$ROW-3.fio"
	stats
	expect_stat rd_req -gt 0
	expect_stat wr_req -gt 0
	detach
	srv_stop
	qemu-img check -q -f qcow2 "$WORK/$ROW.qcow2" || row_fail "the qcow2 image is damaged"
	qemu-img map -f qcow2 --output=json "$WORK/$ROW.qcow2" | grep -q '"data": true' ||
		row_fail "no data in the qcow2 image"
	NOTE="$NOTE; $(counters rd_req wr_req); qemu-img check OK"
}

row_nbd_flush() {
	NOTE="NBD (nbdkit memory), 4k random writes, fsync=8"
	srv_start nbdkit memory "$SIZE" && up || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite "fsync=8"
	run_fio "$WORK/$ROW-1.fio"
	stats
	expect_stat f_req -gt 0
	srv_saw Flush
	NOTE="$NOTE; $(counters wr_req f_req); server: $(grep -c 'Flush' "$WORK/srv-$ROW.nbd.log") flushes"
}

row_nbd_fua() {
	NOTE="NBD, FUA writes (guest-side fuamode=force); cache=writethrough: each write carries the FUA flag"
	srv_start nbdkit memory "$SIZE" && up -- fuamode=force -- --filter=fua || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	stats
	expect_stat f_req -gt 0
	grep -q "Write.*fua=1" "$WORK/srv-$ROW.nbd.log" || row_fail "no FUA write reached the NBD server"
	NOTE="$NOTE; $(counters wr_req f_req); server: $(grep -c 'Write.*fua=1' "$WORK/srv-$ROW.nbd.log") FUA writes"
}

row_nbd_trim() {
	NOTE="NBD (nbdkit memory), write, trim everything, read back zeros"
	srv_start nbdkit memory "$SIZE" && up --discard-enable 1 || return
	verify_job "$WORK/$ROW-1.fio" 64k write
	run_fio "$WORK/$ROW-1.fio"
	mkjob "$WORK/$ROW-2.fio" "[trim-64k]" "rw=trim" "bs=64k" "iodepth=16"
	run_fio "$WORK/$ROW-2.fio"
	mkjob "$WORK/$ROW-3.fio" "[zeros-64k]" "rw=read" "bs=64k" "iodepth=16" \
		"verify=pattern" "verify_pattern=0" "do_verify=1"
	run_fio "$WORK/$ROW-3.fio"
	stats
	expect_stat ds_req -gt 0
	srv_saw Trim
	NOTE="$NOTE; $(counters ds_req)"
}

row_nbd_readonly() {
	NOTE="NBD, read-only disk: data written beforehand verifies, writes refused"
	mkjob "$WORK/$ROW-fill.fio" "[seq-64k]" "rw=write" "bs=64k" "verify=crc32c" "do_verify=0"
	truncate -s "$SIZE" "$IMG"
	sed "s|^ioengine=nbd\$|ioengine=psync|; s|^uri=.*|filename=$IMG|" "$WORK/$ROW-fill.fio" >"$WORK/$ROW-file.fio"
	fio --output=/dev/null "$WORK/$ROW-file.fio" >"$WORK/$ROW.fill" 2>&1 || { row_fail "filling the image failed"; return; }
	_sum=$(md5sum <"$IMG")
	srv_start nbdkit file "$IMG" && up --mode r || return
	run_fio "$(verify_only "$WORK/$ROW-fill.fio")"
	mkjob "$WORK/$ROW-w.fio" "[write]" "rw=write" "bs=4k" "size=64k"
	if NBDURI=$(e2e_uri "$ROW") fio --output=/dev/null "$WORK/$ROW-w.fio" >/dev/null 2>&1; then
		row_fail "fio could write to the read-only disk"
	fi
	[ "$(md5sum <"$IMG")" = "$_sum" ] || row_fail "the read-only image changed"
	stats
	expect_stat wr_req -eq 0
	expect_info readonly 1
	grep -q "Write" "$WORK/srv-$ROW.nbd.log" && row_fail "a write reached the NBD server"
	NOTE="$NOTE; $(counters rd_req wr_req)"
}

row_nbd_outage() {
	NOTE="NBD server (nbdkit file) stopped 1 s and started again under fio writes"
	truncate -s "$SIZE" "$IMG"
	srv_start nbdkit file "$IMG" && up || return
	# errors are expected while the server is away: fio goes on (continue_on_error)
	mkjob "$WORK/$ROW-1.fio" "[randwrite-across-outage]" "rw=randwrite" "bs=4k" "iodepth=8" \
		"runtime=4" "time_based=1" "rate_iops=500" "continue_on_error=io"
	NBDURI=$(e2e_uri "$ROW") timeout -k 5 60 fio --output-format=json --output="$WORK/$ROW-1.json" \
		"$WORK/$ROW-1.fio" >"$WORK/$ROW-1.err" 2>&1 &
	_fio=$!
	sleep 1
	srv_stop
	sleep 1
	srv_start nbdkit file "$IMG" || return
	wait "$_fio"
	[ $? -lt 124 ] || row_fail "fio hung across the outage (killed by timeout)"
	# after the outage everything works again, verified
	verify_job "$WORK/$ROW-2.fio" 4k randwrite "size=25%"
	run_fio "$WORK/$ROW-2.fio"
	e2e_stats "$DEV" >"$WORK/$ROW.stats" || row_fail "no backend counters"
	expect_stat io_errors -gt 0
	grep -q "connection to the NBD server lost" "$LOG" || row_fail "no log line for the lost server"
	grep -q "reconnected to the NBD server" "$LOG" || row_fail "no log line for the reconnect"
	NOTE="$NOTE; $(counters wr_req io_errors); then verified"
}

# The Ceph cluster, started by the first RBD row (about 3 s).
CEPH_UP=
ceph_up() {
	[ -n "$CEPH_UP" ] && return 0
	_cd=$(mktemp -d "${TMPDIR:-/tmp}/ceph.XXXXXXXX") || return 1
	sim_on_exit "sh '$top_srcdir/tests/lib/ceph-cluster.sh' stop '$_cd'"
	_env=$(sh "$top_srcdir/tests/lib/ceph-cluster.sh" start "$_cd" 1073741824)
	case $? in
	0) eval "$_env"; CEPH_UP=1 ;;
	77) NOTE="Ceph not installed: not run"; return 1 ;;
	*) row_fail "the Ceph test cluster did not start"; return 1 ;;
	esac
}

# The row's image and its snapshots go: memstore keeps everything in the
# OSD's memory, and a full cluster blocks writes (the long matrix writes
# 256 MiB per row).
rbd_cleanup() {
	case $ROW in rbd-*) ;; *) return 0 ;; esac
	[ -n "$CEPH_UP" ] || return 0
	rbd snap purge "rbd/$ROW" >/dev/null 2>>"$WORK/ceph.log"
	rbd rm "rbd/$ROW" >/dev/null 2>>"$WORK/ceph.log" || row_fail "rbd rm rbd/$ROW failed"
}

# rbd_image [rbd create options]: a fresh image for the row; PARAMS names it.
rbd_image() {
	ceph_up || return 1
	rbd create --size "$(echo "$SIZE" | tr m M)" "rbd/$ROW" "$@" 2>>"$WORK/ceph.log" ||
		{ row_fail "rbd create: $(tail -n 1 "$WORK/ceph.log")"; return 1; }
	PARAMS="rbd:rbd/$ROW:conf=$CEPH_CONF"
}

row_rbd_verify() {
	NOTE="RBD, 4k random verify + mixed, 1 MiB sequential"
	rbd_image && up || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "verify=crc32c" && run_fio "$WORK/$ROW-2.fio"
	verify_job "$WORK/$ROW-3.fio" 1m write
	run_fio "$WORK/$ROW-3.fio"
	stats
	expect_stat rd_req -gt 0
	expect_stat wr_req -gt 0
	[ "$(rbd status "rbd/$ROW" 2>/dev/null | grep -c watcher=)" = 1 ] || row_fail "not one watcher on the image"
	NOTE="$NOTE; $(counters rd_req wr_req)"
}

row_rbd_flush() {
	NOTE="RBD, 4k random writes, fsync=8 (rbd_aio_flush)"
	rbd_image && up || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite "fsync=8"
	run_fio "$WORK/$ROW-1.fio"
	stats
	expect_stat f_req -gt 0
	NOTE="$NOTE; $(counters wr_req f_req)"
}

row_rbd_fua() {
	NOTE="RBD, FUA writes (guest-side fuamode=force): write + flush"
	rbd_image && up -- fuamode=force -- --filter=fua || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	stats
	expect_stat f_req -gt 0
	NOTE="$NOTE; $(counters wr_req f_req)"
}

row_rbd_trim() {
	NOTE="RBD, write, trim everything in 4 MiB pieces (whole objects), read back zeros"
	rbd_image && up --discard-enable 1 || return
	[ "$(xs read "/local/domain/0/backend/vbd/$DOMU/$DEV/discard-granularity")" = 65536 ] ||
		row_fail "discard-granularity is not 64 KiB"
	verify_job "$WORK/$ROW-1.fio" 64k write
	run_fio "$WORK/$ROW-1.fio"
	_before=$(rbd du "rbd/$ROW" 2>/dev/null | awk -v n="$ROW" '$1 == n { print $4 $5 }')
	mkjob "$WORK/$ROW-2.fio" "[trim-4m]" "rw=trim" "bs=4m" "iodepth=4"
	run_fio "$WORK/$ROW-2.fio"
	mkjob "$WORK/$ROW-3.fio" "[zeros-64k]" "rw=read" "bs=64k" "iodepth=16" \
		"verify=pattern" "verify_pattern=0" "do_verify=1"
	run_fio "$WORK/$ROW-3.fio"
	_after=$(rbd du "rbd/$ROW" 2>/dev/null | awk -v n="$ROW" '$1 == n { print $4 $5 }')
	[ "$_after" != "$_before" ] || row_fail "trim freed nothing in the image ($_before -> $_after)"
	stats
	expect_stat ds_req -gt 0
	NOTE="$NOTE; rbd du $_before -> $_after; $(counters ds_req)"
}

sectors_are() {
	[ "$(xs read "/local/domain/0/backend/vbd/$DOMU/$DEV/sectors" 2>/dev/null)" = "$1" ]
}

row_rbd_resize() {
	NOTE="RBD, rbd resize under the attached guest (update watch, no SIGHUP)"
	rbd_image && up || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	_s0=$(xs read "/local/domain/0/backend/vbd/$DOMU/$DEV/sectors")
	rbd resize --size "$(( ${SIZE%m} * 2 ))M" "rbd/$ROW" >/dev/null 2>&1 || { row_fail "rbd resize"; return; }
	_want=$((_s0 * 2))
	sim_wait_for 10 sectors_are "$_want" || row_fail "sectors did not become $_want after rbd resize"
	# the data written before the resize is intact
	run_fio "$(verify_only "$WORK/$ROW-1.fio")"
	stats
	NOTE="$NOTE; sectors $_s0 -> $(xs read "/local/domain/0/backend/vbd/$DOMU/$DEV/sectors")"
}

row_rbd_snapshot() {
	NOTE="RBD snapshot: attached read-write, served read-only; its data verifies"
	rbd_image && up || return
	mkjob "$WORK/$ROW-1.fio" "[randwrite-4k]" "rw=randwrite" "bs=4k" "iodepth=16" \
		"verify=crc32c" "do_verify=0"
	run_fio "$WORK/$ROW-1.fio"
	detach
	rbd snap create "rbd/$ROW@s1" >/dev/null 2>&1 || { row_fail "rbd snap create"; return; }
	PARAMS="rbd:rbd/$ROW@s1:conf=$CEPH_CONF"
	up || return
	run_fio "$(verify_only "$WORK/$ROW-1.fio")"
	mkjob "$WORK/$ROW-w.fio" "[write]" "rw=write" "bs=4k" "size=64k"
	if NBDURI=$(e2e_uri "$ROW") fio --output=/dev/null "$WORK/$ROW-w.fio" >/dev/null 2>&1; then
		row_fail "fio could write to the snapshot"
	fi
	stats
	expect_stat wr_req -eq 0
	expect_info readonly 1
	grep -q "@s1.* can only be read: served read-only" "$LOG" || row_fail "no log line for the snapshot"
	NOTE="$NOTE; $(counters rd_req wr_req)"
}

# ---- driver -----------------------------------------------------------------

# xbd-back with a --disk rule for each row's image.
start_matrix_back() {
	set --
	for _r in $rows; do
		_rule=$(rule_of "$_r")
		[ -n "$_rule" ] && set -- "$@" --disk "$(rule_target "$_r"):$_rule"
	done
	start_back "$@"
}

start_matrix_back
devid=51728 # xvdb; each row gets the next one (16 apart, like xvdc, ...)
start_all=$(date +%s)
for ROW in $rows; do
	IMG="$WORK/$ROW.img" DEV=$devid NOTE='' ROW_OK=1 PARAMS='' SRV_PID='' ATTACHED=0
	devid=$((devid + 16))
	: >"$WORK/$ROW.lines"
	t0=$(date +%s.%N)
	"row_$(echo "$ROW" | tr - _)"
	if [ -n "$BACK_PID" ] && ! kill -0 "$BACK_PID" 2>/dev/null; then
		row_fail "xbd-back died"
		start_matrix_back
	fi
	detach
	srv_stop
	rbd_cleanup
	t1=$(date +%s.%N)
	rm -f "$IMG" "$WORK/$ROW.qcow2"
	[ -s "$WORK/$ROW.lines" ] || echo "$ROW|-|-|-|not run" >"$WORK/$ROW.lines"
	res=PASS
	[ "$ROW_OK" = 1 ] || { res=FAIL; FAILED="$FAILED $ROW"; }
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	awk -v tail="|$res|${secs}s|$NOTE" '{ print $0 tail }' "$WORK/$ROW.lines" >>"$TABLE"
	echo "row $ROW: $res (${secs}s)"
done

stop_back TERM || FAILED="$FAILED xbd-back-exit"
{
	echo
	echo "xbd end-to-end matrix ($( [ "$long" = 1 ] && echo long || echo short ): $SIZE per row, timed jobs ${RT}s; fio $(fio --version), ioengine=nbd through nbdkit xbd on the simulator)"
	echo "rows:$rows"
	echo "(IOPS and MiB/s are fio's, per job; in a verify job the reads are the verify pass)"
	echo
	echo "| row | fio job | IOPS read/write | MiB/s read/write | verify | row | time | backend / notes |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
	sed 's/|/ | /g; s/^/| /; s/$/ |/; s/  *|/ |/g' "$TABLE"
	echo
	echo "total $(( $(date +%s) - start_all )) s; failed:${FAILED:- none}"
} >"$WORK/report"
cat "$WORK/report"
# several matrix tests may finish at once: append whole tables, one at a time
if [ -n "${E2E_REPORT:-}" ]; then
	if command -v flock >/dev/null 2>&1; then
		flock "$E2E_REPORT.lock" sh -c 'cat "$1" >>"$2"' sh "$WORK/report" "$E2E_REPORT"
	else
		cat "$WORK/report" >>"$E2E_REPORT"
	fi
fi
[ -z "$FAILED" ]
