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
# Short mode (make check): 16 MiB per row, timed jobs capped at 2 s.
# --long or E2E_LONG=1 (make check-long): 256 MiB, 10 s.
# The table of results goes to stdout and, if E2E_REPORT is set, is
# appended to that file.  Exit 0 when every row passed, 1 otherwise.

: "${top_srcdir:?top_srcdir must be set (run through make check)}"
. "$top_srcdir/tests/e2e/lib.sh"

ALL_ROWS="rand4k seq1m flush fua fua-barrier trim multiqueue ring-order0 ring-order4
abi32 abi64 persistent-on persistent-off grant-map grant-copy
cache-writeback cache-writethrough cache-unsafe readonly reattach restart"

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
else
	SIZE=16m RT=2
fi

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
	multiqueue) echo max-queues=4 ;;
	fua-barrier) echo barrier=1 ;;
	persistent-on) echo persistent=1 ;;
	persistent-off) echo persistent=0 ;;
	grant-copy) echo grant-copy=1 ;;
	cache-writeback) echo cache=writeback ;;
	cache-writethrough) echo cache=writethrough ;;
	cache-unsafe) echo cache=unsafe ;;
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
# verified (fio keeps the written blocks' checksums).
mixed_job() { # FILE BS [extra lines]
	_f=$1 _bs=$2
	shift 2
	mkjob "$_f" "[randrw-$_bs]" "rw=randrw" "rwmixread=70" "bs=$_bs" "iodepth=16" \
		"runtime=$RT" "time_based=1" "$@"
}

# Per-row state.
ROW= DEV= IMG= NOTE=

row_fail() {
	echo "row $ROW: FAIL: $*" >&2
	ROW_OK=0
}

# verify_only FILE: the job FILE replayed without writing, checking every
# block it wrote earlier (fio verify_only); prints the new job file.
verify_only() {
	sed 's/^do_verify=0$/do_verify=1/' "$1" >"${1%.fio}-vo.fio"
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
    rd, wr = j["read"], j["write"]
    mib = lambda d: d["bw_bytes"] / 1048576
    # the verify phase of a write job shows up as its reads
    print("%s|%s|%.0f/%.0f|%.1f/%.1f|%s" % (row, j["jobname"], rd["iops"], wr["iops"],
          mib(rd), mib(wr), status if not j["error"] else "error %d" % j["error"]))
PY
}

# expect_stat KEY OP VALUE: a backend counter of this row's disk.
expect_stat() {
	_v=$(e2e_stat "$1")
	[ -n "$_v" ] || { row_fail "backend counter $1 missing"; return; }
	[ "$_v" "$2" "$3" ] || row_fail "backend $1=$_v, expected $2 $3"
}

# front_key KEY: a key of the guest's frontend directory (as dom0).
front_key() {
	e2e_xs read "/local/domain/$E2E_DOMU/device/vbd/$DEV/$1" 2>/dev/null
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
	DEV=$(e2e_disk "$DEV" "$IMG" "$SIZE" "$@") || return 1
	e2e_wait_state "$DEV" 2 || { row_fail "xbd-back did not reach InitWait"; return 1; }
}

detach() {
	e2e_nbd_stop "$ROW"
	( sim_env 0; "$XBD_SIM" disk remove "$SIMDIR" "$E2E_DOMU" "$DEV" ) >/dev/null 2>&1 ||
		row_fail "xbd-sim disk remove: the backend did not reach Closed"
}

# ---- the rows -------------------------------------------------------------

row_rand4k() {
	NOTE="4k random I/O, iodepth 16"
	attach && e2e_nbd_start "$ROW" "$DEV" || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "verify=crc32c"
	run_fio "$WORK/$ROW-2.fio"
	stats
	expect_stat rd_req -gt 0
	expect_stat wr_req -gt 0
	NOTE="$NOTE; $(counters rd_req wr_req rings)"
}

row_seq1m() {
	NOTE="1 MiB sequential, 256 indirect segments"
	attach && e2e_nbd_start "$ROW" "$DEV" indirect=256 || return
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
	attach && e2e_nbd_start "$ROW" "$DEV" || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite "fsync=8"
	run_fio "$WORK/$ROW-1.fio"
	stats
	expect_stat f_req -gt 0
	NOTE="$NOTE; $(counters wr_req f_req)"
}

# FUA: fio's nbd engine never sets FUA itself, so nbdkit's fua filter
# (fuamode=force) turns each of fio's writes into a FUA write to the plugin;
# qemu-io additionally sends client FUA writes (write -f) over NBD.
fua_common() {
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	if [ "$HAVE_QEMU_IO" = 1 ]; then
		_uri=$(e2e_uri "$ROW")
		# qemu-io must not see fuamode=force's changes: use a second export
		e2e_nbd_start "$ROW-plain" "$DEV" || return
		qemu-io -f raw -c "write -f -P 0xa5 0 64k" "$(e2e_uri "$ROW-plain")" >"$WORK/$ROW.qio" 2>&1 ||
			row_fail "qemu-io FUA write failed: $(cat "$WORK/$ROW.qio")"
		qemu-io -f raw -c "read -P 0xa5 0 64k" "$(e2e_uri "$ROW-plain")" >>"$WORK/$ROW.qio" 2>&1 ||
			row_fail "qemu-io read-back of the FUA write failed"
		e2e_nbd_stop "$ROW-plain"
	fi
}

row_fua() {
	NOTE="4k random FUA writes (nbdkit fua filter, fuamode=force) + qemu-io write -f"
	attach && e2e_nbd_start "$ROW" "$DEV" fuamode=force -- --filter=fua || return
	fua_common
	stats
	# feature-flush-cache: a FUA write reaches the backend as write + flush
	expect_stat f_req -gt 0
	NOTE="$NOTE; $(counters wr_req f_req)"
}

row_fua_barrier() {
	NOTE="FUA writes to a disk in barrier mode (feature-barrier)"
	attach && e2e_nbd_start "$ROW" "$DEV" fuamode=force -- --filter=fua || return
	[ "$(e2e_xs read "/local/domain/0/backend/vbd/$E2E_DOMU/$DEV/feature-barrier" 2>/dev/null)" = 1 ] ||
		row_fail "the backend does not offer feature-barrier"
	fua_common
	stats
	expect_stat barrier_req -gt 0
	NOTE="$NOTE; $(counters wr_req barrier_req f_req)"
}

row_trim() {
	NOTE="write, trim everything (64k), read back zeros"
	attach --discard-enable 1 && e2e_nbd_start "$ROW" "$DEV" || return
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
	attach && e2e_nbd_start "$ROW" "$DEV" queues=4 || return
	[ "$(front_key multi-queue-num-queues)" = 4 ] ||
		row_fail "the frontend did not negotiate 4 queues ($(front_key multi-queue-num-queues))"
	# each job writes and verifies its own quarter of the disk
	mkjob "$WORK/$ROW-1.fio" "[verify-4x]" "rw=randwrite" "bs=4k" "iodepth=8" \
		"numjobs=4" "offset_increment=25%" "size=25%" "verify=crc32c" "do_verify=1"
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "numjobs=4" "group_reporting=1"
	run_fio "$WORK/$ROW-2.fio"
	stats
	expect_stat rings -eq 4
	NOTE="$NOTE; $(counters rings wr_req rd_req)"
}

ring_row() { # ORDER
	NOTE="ring-order $1 ($((1 << $1)) page(s)), iodepth 64"
	attach && e2e_nbd_start "$ROW" "$DEV" ring-order="$1" || return
	_o=$(front_key ring-page-order)
	[ "${_o:-0}" = "$1" ] || row_fail "the frontend wrote ring-page-order=${_o:-none}, not $1"
	verify_job "$WORK/$ROW-1.fio" 4k randwrite "iodepth=64"
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "iodepth=64"
	run_fio "$WORK/$ROW-2.fio"
	stats
	NOTE="$NOTE; $(counters rd_req wr_req)"
}
row_ring_order0() { ring_row 0; }
row_ring_order4() { ring_row 4; }

abi_row() { # PROTOCOL
	NOTE="protocol $1"
	attach && e2e_nbd_start "$ROW" "$DEV" protocol="$1" || return
	[ "$(front_key protocol)" = "$1" ] || row_fail "the frontend wrote protocol=$(front_key protocol)"
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	verify_job "$WORK/$ROW-2.fio" 128k write
	run_fio "$WORK/$ROW-2.fio"
	stats
	expect_stat wr_req -gt 0
	NOTE="$NOTE; $(counters rd_req wr_req)"
}
row_abi32() { abi_row x86_32-abi; }
row_abi64() { abi_row x86_64-abi; }

grant_row() { # MODE
	attach && e2e_nbd_start "$ROW" "$DEV" || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "verify=crc32c"
	run_fio "$WORK/$ROW-2.fio"
	stats
}

row_persistent_on() {
	NOTE="persistent grants on"
	grant_row
	expect_stat persistent_hits -gt 0
	NOTE="$NOTE; $(counters grant_map persistent_hits persistent_misses)"
}

row_persistent_off() {
	NOTE="persistent grants off"
	grant_row
	expect_stat persistent_hits -eq 0
	expect_stat grant_unmap -gt 0
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
	NOTE="$NOTE; $(counters grant_map grant_copy)"
}

cache_row() { # MODE
	NOTE="cache=$1, 4k random writes with fsync=8"
	attach && e2e_nbd_start "$ROW" "$DEV" || return
	verify_job "$WORK/$ROW-1.fio" 4k randwrite "fsync=8"
	run_fio "$WORK/$ROW-1.fio"
	mixed_job "$WORK/$ROW-2.fio" 4k "fsync=8" "verify=crc32c"
	run_fio "$WORK/$ROW-2.fio"
	stats
	expect_stat f_req -gt 0
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
	attach --mode r && e2e_nbd_start "$ROW" "$DEV" || return
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
	NOTE="$NOTE; $(counters rd_req wr_req)"
}

row_reattach() {
	NOTE="write; detach (xbd-sim disk remove) and re-attach; read back"
	attach && e2e_nbd_start "$ROW" "$DEV" || return
	mkjob "$WORK/$ROW-1.fio" "[randwrite-4k]" "rw=randwrite" "bs=4k" "iodepth=16" \
		"verify=crc32c" "do_verify=0"
	run_fio "$WORK/$ROW-1.fio"
	stats
	detach
	cp --sparse=always "$IMG" "$WORK/$ROW.saved"
	attach && e2e_nbd_start "$ROW" "$DEV" || return
	run_fio "$(verify_only "$WORK/$ROW-1.fio")"
	if command -v nbdcopy >/dev/null 2>&1; then
		nbdcopy "$(e2e_uri "$ROW")" "$WORK/$ROW.copy" ||
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
	attach && e2e_nbd_start "$ROW" "$DEV" || return
	mkjob "$WORK/$ROW-1.fio" "[randwrite-4k]" "rw=randwrite" "bs=4k" "iodepth=16" \
		"verify=crc32c" "do_verify=0"
	run_fio "$WORK/$ROW-1.fio"
	e2e_back_stop TERM || row_fail "xbd-back did not exit 0 on SIGTERM"
	back_start
	# the same nbdkit (the guest's frontend) keeps its ring across the restart
	run_fio "$(verify_only "$WORK/$ROW-1.fio")"
	# and writes still work afterwards
	verify_job "$WORK/$ROW-2.fio" 64k randwrite "size=25%"
	run_fio "$WORK/$ROW-2.fio"
	stats
	expect_stat rd_req -gt 0
	NOTE="$NOTE; after restart: $(counters rd_req wr_req)"
}

# ---- driver -----------------------------------------------------------------

back_start() {
	set --
	for _r in $rows; do
		_rule=$(rule_of "$_r")
		[ -n "$_rule" ] && set -- "$@" --disk "$WORK/$_r.img:$_rule"
	done
	e2e_back_start "$@"
}

back_start
devid=51728 # xvdb; each row gets the next one (16 apart, like xvdc, ...)
start_all=$(date +%s)
for ROW in $rows; do
	IMG="$WORK/$ROW.img" DEV=$devid NOTE= ROW_OK=1
	devid=$((devid + 16))
	: >"$WORK/$ROW.lines"
	t0=$(date +%s.%N)
	"row_$(echo "$ROW" | tr - _)"
	if [ -n "$E2E_BACK_PID" ] && ! kill -0 "$E2E_BACK_PID" 2>/dev/null; then
		row_fail "xbd-back died"
		back_start
	fi
	detach
	t1=$(date +%s.%N)
	rm -f "$IMG"
	[ -s "$WORK/$ROW.lines" ] || echo "$ROW|-|-|-|not run" >"$WORK/$ROW.lines"
	res=PASS
	[ "$ROW_OK" = 1 ] || { res=FAIL; FAILED="$FAILED $ROW"; }
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	awk -v tail="|$res|${secs}s|$NOTE" '{ print $0 tail }' "$WORK/$ROW.lines" >>"$TABLE"
	echo "row $ROW: $res (${secs}s)"
done

e2e_back_stop TERM || FAILED="$FAILED xbd-back-exit"
{
	echo
	echo "xbd end-to-end matrix ($( [ "$long" = 1 ] && echo long || echo short ): $SIZE per row, timed jobs ${RT}s; fio $(fio --version), ioengine=nbd through nbdkit xbd on the simulator)"
	echo
	echo "| row | fio job | IOPS read/write | MiB/s read/write | verify | row | time | backend / notes |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
	sed 's/|/ | /g; s/^/| /; s/$/ |/; s/  *|/ |/g' "$TABLE"
	echo
	echo "total $(( $(date +%s) - start_all )) s; failed:${FAILED:- none}"
} | tee -a "${E2E_REPORT:-/dev/null}"
[ -z "$FAILED" ]
