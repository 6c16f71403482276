#!/bin/sh
# tests/e2e/demo.sh: the guided demo behind `make demo` (and
# scripts/demo.sh): a simulated Xen host, xbd-back serving a disk image to
# a guest domain, the guest's disk exported over NBD by `nbdkit xbd`, fio
# (ioengine=nbd) running a write-then-verify job and a 4k random
# read/write job, fio's figures next to xbd-back's counters for the disk,
# and everything stopped.  It narrates each step for someone who has never
# used Xen, and cleans up on failure and on Ctrl-C.
#
#   top_srcdir=... top_builddir=... tests/e2e/demo.sh
# Optional: DEMO_MIB (disk size in MiB, default 256), DEMO_RUNTIME (seconds of
# the random job, default 10).

: "${top_srcdir:?top_srcdir must be set (use make demo)}"
: "${top_builddir:?top_builddir must be set (use make demo)}"
. "$top_srcdir/tests/e2e/lib.sh"

MIB=${DEMO_MIB:-256}
SIZE=${MIB}m
RUNTIME=${DEMO_RUNTIME:-10}
: "${E2E_FIO_TIMEOUT:=120}" # a hung request fails the demo instead of hanging it
T0=$(date +%s)
STEP=0
NSTEPS=7

say() { printf '%s\n' "$*"; }
# Indented, wrapped explanation text.
explain() { printf '%s\n' "$*" | fold -s -w 76 | sed 's/^/    /'; }
step() {
	STEP=$((STEP + 1))
	printf '\n[%d/%d] %s\n' "$STEP" "$NSTEPS" "$*"
}
die() {
	say "" "DEMO FAILED: $*"
	bk_fail "$*"
}

e2e_need

say "=== xbd demo: a virtual machine's disk, served by a userspace Xen backend ==="
say ""
explain "On a Xen machine every virtual machine is a \"domain\". Domain 0 (dom0)" \
	"is the privileged one: it owns the real disks and runs the \"backends\"" \
	"that serve the other domains' virtual disks. A guest domain reaches its" \
	"disk through the blkif protocol: a ring of requests in memory shared" \
	"with dom0 (pages lent through \"grant tables\"), \"event channels\" as" \
	"doorbells, and xenstore, a small key-value store in which both sides" \
	"meet and agree on the details."
explain "This machine runs no Xen. xbd simulates a Xen host in ordinary" \
	"processes: a xenstore daemon, grant tables, event channels and domains." \
	"The backend and the guest-side driver below are the same programs that" \
	"run on real Xen; only the hypervisor underneath is simulated."

step "Starting a simulated Xen host"
e2e_setup
# sim.sh's exit trap stops everything; say why when it is an interruption.
trap 'say "" "Interrupted: stopping everything we started..."; exit 130' INT
trap 'say "" "Terminated: stopping everything we started..."; exit 143' TERM
trap 'exit 129' HUP
explain "xbd-sim start $SIMDIR: the hypervisor's state lives in that folder," \
	"a xenstore daemon (xbd-xenstored) runs, and dom0 exists."

step "Creating the guest: domain 1, named \"guest\""
explain "In real life \`xl create\` would boot a Linux VM here. The simulated" \
	"guest has memory and a grant table but runs no kernel: the guest's" \
	"disk driver will be a program (step 5), run as domain 1."

step "Starting xbd-back, the disk backend, in dom0"
if [ -x "$XBDCTL" ]; then
	STATS_HOW="xbdctl stats"
else
	STATS_HOW="xbd-back's SIGUSR1 counters"
fi
start_back
explain "xbd-back does what the kernel's xen-blkback or QEMU do on a Xen host:" \
	"it watches xenstore for disks given to guests, opens their image files," \
	"and serves the guests' read/write/flush requests with Linux AIO." \
	"It runs as pid $BACK_PID; its counters are read with $STATS_HOW."

step "Giving the guest a $MIB MiB disk"
IMG="$WORK/guest-disk.img"
new_disk "$IMG" "$SIZE"
DEV=$(add_disk "$DOMU" xvdb "$IMG") || die "xbd-sim disk add failed"
sim_wait_for 10 state_is "$DOMU" "$DEV" 2 || die "xbd-back did not pick up the disk"
explain "The image file is $IMG. xbd-sim disk add wrote the" \
	"same xenstore entries as the xl line" \
	"disk = ['vdev=xvdb, access=rw, target=$IMG']: the guest's disk xvdb" \
	"(device number $DEV). xbd-back noticed it, opened the file, published" \
	"what it supports (multi-page rings, several queues, persistent grants," \
	"indirect requests, flush, discard) and now waits for the guest: backend" \
	"state $(bstate "$DOMU" "$DEV") = InitWait."

step "Inside the guest: nbdkit with the xbd plugin"
e2e_nbd_start disk xvdb || die "nbdkit xbd did not start"
URI=$(e2e_uri disk)
xs_front() { xs read "/local/domain/$DOMU/device/vbd/$DEV/$1" 2>/dev/null; }
queues=$(xs_front multi-queue-num-queues)
order=$(xs_front ring-page-order)
explain "A Linux guest has a blkfront driver in its kernel; here the guest's" \
	"driver is libxbdfront, loaded into nbdkit as a plugin and run as domain" \
	"1. It read what xbd-back offers, set up ${queues:-1} queue(s) of" \
	"$((1 << ${order:-0}))-page shared rings, lent them to dom0 and rang the" \
	"doorbell: the backend is now in state $(bstate "$DOMU" "$DEV") = Connected" \
	"(protocol $(xs_front protocol), persistent grants" \
	"$( [ "$(xs_front feature-persistent)" = 1 ] && echo on || echo off))."
explain "nbdkit makes that disk available over NBD (the network block device" \
	"protocol), so ordinary tools can use it: $URI"
size_b=$(nbdinfo --size "$URI") || die "nbdinfo failed"
explain "nbdinfo says the disk has $size_b bytes ($((size_b / 1048576)) MiB)."

step "Running fio (Debian's, ioengine=nbd) on the guest's disk"
cat >"$WORK/verify.fio" <<EOF
[global]
ioengine=nbd
uri=\${NBDURI}
[write-then-verify]
rw=write
bs=1m
size=$SIZE
iodepth=8
verify=crc32c
do_verify=1
verify_fatal=1
end_fsync=1
EOF
cat >"$WORK/randrw.fio" <<EOF
[global]
ioengine=nbd
uri=\${NBDURI}
[random-4k]
rw=randrw
rwmixread=70
bs=4k
size=$SIZE
iodepth=16
runtime=$RUNTIME
time_based=1
verify=crc32c
verify_fatal=1
EOF

# The backend's counters before and after each job, for the comparison.
snap() {
	e2e_stats "$DEV" >"$WORK/stats.$1" || die "cannot read xbd-back's counters"
}
job_report() { # NAME: fio's figures of job NAME next to the backend's deltas
	python3 - "$WORK/disk.json" "$WORK/stats.$1.before" "$WORK/stats.$1.after" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
job = json.loads(text[text.index("{"):])["jobs"][0]
def counters(path):
    pairs = (l.strip().split("=", 1) for l in open(path) if "=" in l)
    return {k: int(v) for k, v in pairs if v.isdigit()}
b, a = counters(sys.argv[2]), counters(sys.argv[3])
d = {k: a[k] - b.get(k, 0) for k in a}
MiB = 1048576.0
rd, wr = job["read"], job["write"]
def lat(x):
    p = x["clat_ns"].get("percentile", {})
    p99 = p.get("99.000000", 0) / 1000.0
    return "%.0f us mean, %.0f us p99" % (x["clat_ns"]["mean"] / 1000.0, p99)
rows = []
def row(label, fio, back):
    rows.append((label, fio, back))
for name, x, req, sect in (("reads", rd, "rd_req", "rd_sect"), ("writes", wr, "wr_req", "wr_sect")):
    if not x["total_ios"] and not d[req]:
        continue
    mib = x["io_bytes"] / MiB
    bmib = d[sect] * 512 / MiB
    avg = d[sect] * 512 / 1024.0 / d[req] if d[req] else 0
    row(name, "%.1f MiB in %d I/Os" % (mib, x["total_ios"]),
        "%.1f MiB in %d ring requests (%.0f KiB each)" % (bmib, d[req], avg))
    row("", "%.0f IOPS, %.1f MiB/s" % (x["iops"], x["bw_bytes"] / MiB), "")
    row("", "latency %s" % lat(x), "")
syncs = "%d" % job.get("sync", {}).get("total_ios", 0)
if "end_fsync" in job.get("job options", {}):
    syncs = "1 at the end (end_fsync)"  # fio does not count it in total_ios
row("flushes", syncs, "%d" % (d["f_req"] + d["barrier_req"]))
sub = d["io_submit"]
row("storage", "", "%d io_submit calls, %.1f requests per call" %
    (sub, d["submitted"] / float(sub) if sub else 0))
row("grants", "", "%d map calls, %d copy calls, %d persistent hits" %
    (d["grant_map"], d["grant_copy"], d["persistent_hits"]))
row("doorbells", "", "%d received, %d sent" % (d["notify_recv"], d["notify_sent"]))
row("errors", "%d" % job["error"], "%d" % (d["errors"] + d["grant_errors"] + d["io_errors"]))
print("      %-10s %-38s %s" % ("", "fio (in the guest)", "xbd-back (in dom0), this job"))
for label, f, bk in rows:
    print("      %-10s %-38s %s" % (label, f, bk))
PY
}
run_job() { # NAME JOBFILE
	snap "$1.before"
	if ! e2e_fio disk "$2"; then
		[ "${E2E_FIO_RC:-0}" -lt 128 ] || kill -INT $$
		die "fio job $1 failed (see above)"
	fi
	snap "$1.after"
}

say ""
say "  Job 1, write then verify: fio writes the whole disk in 1 MiB blocks, each"
say "  carrying a crc32c checksum and its own position, flushes (the data must"
say "  now be on stable storage), then reads it all back and checks every block."
run_job verify "$WORK/verify.fio"
say "  -> verify OK: every block read back exactly as written."
job_report verify
say ""
say "  Job 2, 4k random read/write: ${RUNTIME} seconds of 4 KiB random reads (70%)"
say "  and writes (30%), 16 requests in flight; reads of blocks written during"
say "  the job are checked (crc32c) too."
run_job randrw "$WORK/randrw.fio"
say "  -> no errors, verify OK."
job_report randrw

say ""
if [ -x "$XBDCTL" ]; then
	say "  The backend's own view of the disk (xbdctl stats $DOMU/$DEV), totals since attach:"
	( sim_env 0; "$XBDCTL" stats "$DOMU/$DEV" ) 2>&1 | sed -n '1,/^  ring /p' |
		grep -v '^  ring ' | sed 's/^/    /'
else
	say "  The backend's counters for the disk (SIGUSR1), totals since attach:"
	sed 's/^/    /' "$WORK/stats.randrw.after" | paste -sd' ' | fold -s -w 76 | sed 's/^/    /'
fi

step "Stopping everything"
e2e_nbd_stop disk
explain "nbdkit stopped: the guest's driver closed its side (Closing, Closed)."
"$XBD_SIM" disk remove "$SIMDIR" "$DOMU" "$DEV" >/dev/null 2>&1 ||
	die "xbd-sim disk remove: the backend did not close the disk"
explain "The disk was detached as \`xl block-detach\` would: xbd-back closed it" \
	"and its xenstore entries are gone."
pid=$BACK_PID
stop_back TERM || die "xbd-back did not exit cleanly on SIGTERM"
explain "xbd-back (pid $pid) stopped on SIGTERM, exit status 0."
dir=$SIMDIR
sim_stop
left=$(ps -eo pid=,args= | grep -F -e "$dir" -e "$WORK" | grep -v grep || :)
[ -z "$left" ] || die "processes left behind: $left"
explain "The simulated host is gone ($dir removed); no process is left."

say ""
say "=== Done in $(( $(date +%s) - T0 )) s: a guest wrote, verified and randomly read/wrote"
say "    its disk through the Xen blkif protocol, served by xbd-back. ==="
