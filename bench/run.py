#!/usr/bin/env python3
"""bench/run.py: `make bench`.  xbd on the simulator next to its physical
limit (fio --ioengine=libaio on the same backing file) and next to itself
with one idea of the data path switched off (A/B), all in one run.

For every workload (4k random read QD1 and QD32, 4k random write QD32, 4k
sync write QD1, 1 MiB sequential read QD8) and every target (a file in
/dev/shm, the null engine, a file on the real disk) it runs fio, then
`xbd-front bench` into a fresh `xbd-back --run` with the default settings,
then the A/B variants that row is meant to show, and repeats the whole
sweep BENCH_REPEAT times, reversing the order every other sweep, so that
each ratio is taken between neighbours in time.  Figures are medians over
the sweeps; ratios are medians of the per-sweep ratios.

Prints the tables (100 columns), writes table.txt, results.json (every
sample), chart.png (with chart.gp and its .dat files) into --out, and says
where.  See BENCHMARKING.md.

Environment: BENCH_RUNTIME (seconds per run, default 2), BENCH_REPEAT
(sweeps, default 3), BENCH_BUDGET (seconds: no sweep starts that would
end later and no run starts after it, default 540), BENCH_PIN (xbd-back on CPU 0, the guest side
and fio on CPU 1: qd1 (default) for the QD1 rows, 1 for all, 0 for none),
BENCH_SIZE_MB (backing files, default 256),
BENCH_DISK_DIR (where the real-disk file goes, default --out), BENCH_ONLY
(comma-separated workload or target names, or workload:target pairs, to
run only those rows; `idle` adds the idle measurement),
FIO (the fio binary), NBDKIT (for the idle measurement).
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

# ---- what is measured -------------------------------------------------------

# name, label, fio/xbd-front arguments.  'sync': every write durable on
# completion: fio opens with O_DSYNC; xbd-front bench sends FUA writes
# (--fua: write + flush with feature-flush-cache, the guest's path); an
# xbd-front without --fua gets xbd-back --cache writethrough instead.
WORKLOADS = [
    dict(name="rr1", label="4k randread QD1", rw="randread", bs="4k", qd=1),
    dict(name="rr32", label="4k randread QD32", rw="randread", bs="4k", qd=32),
    dict(name="rw32", label="4k randwrite QD32", rw="randwrite", bs="4k", qd=32),
    dict(name="sw1", label="4k syncwrite QD1", rw="randwrite", bs="4k", qd=1, sync=True),
    dict(name="sr8", label="1M seqread QD8", rw="read", bs="1m", qd=8),
]
TARGETS = ["shm", "null", "disk"]
# The storage engines reaching other storage: xbd-back's NBD engine on an
# nbdkit file export of a /dev/shm file, and its RBD engine on an image in
# a one-node memstore Ceph cluster (tests/lib/ceph-cluster.sh).  Their
# physical limit is fio's own nbd and rbd engines on the same export or
# image, with the same job.  Only these workloads; no A/B columns.
ENGINE_TARGETS = ["nbd", "rbd"]
ENGINE_WORKLOADS = ("rr1", "rr32", "rw32", "sr8")

# xbd-back variants (B sides).  Each A/B column names its A and B config.
XBD_CONFIGS = {
    "xbd": [],
    "batch1": ["--max-batch", "1"],
    "nopoll": ["--poll-max-ns", "0"],
    "nopers": ["--persistent", "0", "--grants", "map"],
    "copy": ["--grant-copy"],
    "nojournal": ["--journal", "0"],
    # changed-block tracking on every disk (issue 49; its files in the
    # simulated host's directory, the default cbt-dir there), with a
    # checkpoint made before the client starts (CHECKPOINT_CONFIGS): without
    # one the rings count their writes but mark nothing
    "cbt": ["--cbt", "1"],
    "workers": ["--workers", "1"],
    # sync-write variants: every plain write RWF_DSYNC; FUA writes as barriers
    "wthru": ["--cache", "writethrough"],
    "wthru-fds": ["--cache", "writethrough", "--fua-mode", "fdatasync"],
    "barrier": ["--barrier"],
    "barrier-fds": ["--barrier", "--fua-mode", "fdatasync"],
    # the file engines: io_uring (A of the engine column) over aio (the default)
    "uring": ["--engine", "uring"],
    # an idle limiter: limits far above any load, so every request is checked, none held
    "limit": ["--iops-total", "1000000000", "--bps-total", "1000000000000"],
}
# Counting runs: the same xbd-back under `strace -f -c` (every thread; the
# ring thread makes nearly all of them), once per row in the first sweep
# only, since strace slows what it counts; their IOPS are not reported.
SYSCALL_CONFIGS = {"xbd-sys": "xbd", "uring-sys": "uring"}
CHECKPOINT_CONFIGS = {"cbt"}
for _c, _base in SYSCALL_CONFIGS.items():
    XBD_CONFIGS[_c] = XBD_CONFIGS[_base]
ENGINE_ROWS = [("rr32", "disk"), ("rr1", "disk"), ("rr32", "shm")]

# column, header, A, B, metric, rows (workload, target) it is run on, sense
# of the ratio shown (A over B), and what the target asks of it.
AB = [
    dict(col="batch", head="b32/b1", a="xbd", b="batch1", metric="iops",
         rows=[(w, t) for w in ("rr32", "rw32") for t in TARGETS],
         what="IOPS with --max-batch 32 over --max-batch 1"),
    dict(col="poll", head="poll", a="xbd", b="nopoll", metric="p50",
         rows=[("rr1", t) for t in TARGETS],
         what="p50 latency with polling (--poll-max-ns 32000) over without (0)"),
    dict(col="pers", head="pers", a="xbd", b="nopers", metric="iops",
         rows=[(w, t) for w in ("rr32", "sr8") for t in ("shm", "null")],
         what="IOPS with persistent grants over --persistent 0 (map+unmap per request)"),
    dict(col="copy", head="map/cp", a="nopers", b="copy", metric="iops", hidden=True,
         rows=[(w, t) for w in ("rr32", "sr8") for t in ("shm", "null")],
         what="IOPS with grant map (--persistent 0) over --grant-copy"),
    dict(col="journal", head="jrnl", a="xbd", b="nojournal", metric="iops",
         rows=[(w, t) for w in ("rr32", "rw32") for t in ("shm", "null")],
         what="IOPS with every ring's crash journal over --journal 0"),
    dict(col="cbt", head="cbt", a="cbt", b="xbd", metric="iops", hidden=True,
         rows=[(w, t) for w in ("rr32", "rw32") for t in ("shm", "null")],
         what="IOPS with changed-block tracking (--cbt 1) over without (the default)"),
    dict(col="workers", head="wrk", a="workers", b="xbd", metric="iops", hidden=True,
         rows=[(w, t) for w in ("rr32", "rw32") for t in ("shm", "null")],
         what="IOPS with each guest's disks served by its confined worker (--workers 1) over "
              "all in the main process (--workers 0); table 3's cpu columns: both processes"),
    dict(col="limit", head="lim", a="limit", b="xbd", metric="iops", hidden=True,
         rows=[("rr32", "null"), ("rr32", "shm"), ("rr1", "shm")],
         what="IOPS with an idle limiter (iops-total and bps-total far above the load: every "
              "request checked, none held) over no limit set (the default)"),
    dict(col="uring", head="ur/aio", a="uring", b="xbd", metric="iops", rows=ENGINE_ROWS,
         what="IOPS with engine = uring (io_uring) over the default engine = aio (libaio)"),
    dict(col="fua", head="dsy/fd", a="wthru", b="wthru-fds", metric="iops", fua=True,
         rows=[("sw1", t) for t in ("shm", "disk")],
         what="sync-write IOPS: every write made durable with RWF_DSYNC (--cache writethrough) "
              "over the same write followed by fdatasync (--fua-mode fdatasync)"),
    dict(col="fuabar", head="bar d/f", a="barrier", b="barrier-fds", metric="iops", fua=True,
         hidden=True, rows=[("sw1", t) for t in ("shm", "disk")],
         what="sync-write IOPS, FUA writes as barriers (drain, pre-flush, write): the write "
              "with RWF_DSYNC over the write + fdatasync (--barrier --fua-mode fdatasync)"),
    dict(col="fuapath", head="wt/fl", a="wthru", b="xbd", metric="iops", fua=True,
         hidden=True, rows=[("sw1", t) for t in ("shm", "disk")],
         what="sync-write IOPS: every write RWF_DSYNC (--cache writethrough) over FUA writes "
              "as write + flush (feature-flush-cache, xbd-front --fua)"),
    dict(col="fuafio", head="fio d/f", a="fio", b="fio-fdatasync", metric="iops",
         hidden=True, rows=[("sw1", t) for t in ("shm", "disk")],
         what="fio alone: O_DSYNC writes over write + fdatasync"),
]

MISSING = []
MISSING_FRONT_FUA = (
    "xbd-front bench: no --fua (FUA writes); the xbd sync-write row uses xbd-back --cache "
    "writethrough and the FUA columns are n/a")

CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---- the simulated host -----------------------------------------------------

class Host:
    """A simulated host with one guest and its three disks."""

    def __init__(self, builddir, work, shm_file, disk_file, size_mb, extra=None):
        self.b = builddir
        self.sim = os.path.join(builddir, "sim/xbd-sim")
        self.dir = os.path.join(work, "sim")
        env = dict(os.environ, XBD_XENSTORED=os.path.join(builddir, "xenstore/xbd-xenstored"))
        self.base_env = env
        subprocess.run([self.sim, "start", self.dir], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        self.env0 = self.env(0)
        self.dom = int(self.xsim("domain", "create", self.dir).strip())
        self.vdev = {}
        for vdev, tgt, params in (("xvdb", "null", "null:%dM" % size_mb),
                                  ("xvdc", "shm", shm_file),
                                  ("xvdd", "disk", disk_file)):
            self.xsim("disk", "add", self.dir, str(self.dom), vdev, params)
            self.vdev[tgt] = vdev
        for vdev, (tgt, params) in zip(("xvde", "xvdf"), sorted((extra or {}).items())):
            self.xsim("disk", "add", self.dir, str(self.dom), vdev, params)
            self.vdev[tgt] = vdev

    def xsim(self, *args):
        return subprocess.run([self.sim, *args], check=True, env=self.base_env,
                              capture_output=True, text=True).stdout

    def env(self, dom):
        e = dict(self.base_env)
        for line in self.xsim("env", self.dir, str(dom)).splitlines():
            m = re.match(r"export (\w+)=(.*)$", line)
            if m:
                e[m.group(1)] = m.group(2).strip("'")
        return e

    def stop(self):
        subprocess.run([self.sim, "stop", self.dir], env=self.base_env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


# The --run command: act as the guest, note the CPU ticks of the xbd-back
# that started us before and after the client (so its start-up and
# teardown are not counted), run the client.  `idle S` instead attaches
# through the nbdkit plugin and does nothing for S seconds.
WRAPPER = r"""#!/bin/sh
# ticks: user and system CPU ticks of xbd-back ($p) with those of the
# children it reaped (workers that exited) and of its running workers
# (`xbd-back --worker`: a guest's disks are served there), as "USER SYS".
ticks() {
	{
		cut -d' ' -f14-17 /proc/$p/stat
		for q in $(pgrep -P "$p" -f -- "--worker"); do
			cut -d' ' -f14,15 /proc/$q/stat 2>/dev/null
		done
	} | awk '{ u += $1 + $3; s += $2 + $4 } END { print u + 0, s + 0 }'
}
if [ "$1" = --ticks ]; then
	p=$2
	ticks
	exit 0
fi
d=$1 out=$2; shift 2
p=$PPID
while [ "$p" -gt 1 ] && [ "$(cat /proc/$p/comm 2>/dev/null)" != xbd-back ]; do
	p=$(cut -d' ' -f4 /proc/$p/stat)
done
eval "$("$XBD_BENCH_SIM" env "$XBD_BENCH_SIMDIR" "$d")" || exit 1
if [ "$1" = idle ]; then
	exec "$NBDKIT" -U - "$XBD_BENCH_PLUGIN" vdev="$3" queues=1 --run \
		"sleep 0.5; '$0' --ticks $p >'$out.t0'; sleep $2; '$0' --ticks $p >'$out.t1'"
fi
st=
if [ -n "$XBD_BENCH_STRACE" ]; then
	# every thread of xbd-back, counted until the client is done
	"$XBD_BENCH_STRACE" -f -c -p "$p" -o "$out.strace" 2>"$out.strace-err" &
	st=$!
	i=0
	while [ $i -lt 40 ] && ! grep -q attached "$out.strace-err" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
	done
fi
if [ -n "$XBD_BENCH_XBDCTL" ]; then
	# a checkpoint on every disk (as dom0), once its tracking is open (CBT on/0)
	(
		eval "$("$XBD_BENCH_SIM" env "$XBD_BENCH_SIMDIR" 0)" || exit 1
		i=0
		while [ $i -lt 100 ]; do
			"$XBD_BENCH_XBDCTL" list >"$out.list" 2>/dev/null
			awk '$1 ~ /^vbd\// { v++; if ($(NF - 1) != "on/1") n++ } END { exit !(v && !n) }' \
				"$out.list" && exit 0
			for v in $(awk '$1 ~ /^vbd\// && $(NF - 1) == "on/0" { print $1 }' "$out.list"); do
				"$XBD_BENCH_XBDCTL" checkpoint "$v" bench >/dev/null 2>&1
			done
			sleep 0.05
			i=$((i + 1))
		done
		echo "bench: no checkpoint on every disk: $(cat "$out.list")" >&2
		exit 1
	) || exit 1
	rm -f "$out.list"
fi
ticks >"$out.t0"
if [ -n "$XBD_BENCH_FRONT_CPU" ]; then
	taskset -c "$XBD_BENCH_FRONT_CPU" "$@"
else
	"$@"
fi
rc=$?
ticks >"$out.t1"
if [ -n "$st" ]; then
	kill -INT "$st"
	wait "$st"
fi
exit $rc
"""


def ticks(path):
    try:
        with open(path) as f:
            u, s = f.read().split()
        return (int(u) + int(s)) / CLK_TCK
    except (OSError, ValueError):
        return None


COUNTER_RE = re.compile(r"\b([a-z_0-9]+)=(\d+)(?=[\s]|$)")


def parse_counters(text):
    """Sum the per-ring counters xbd-back prints at disconnect (-v -v)."""
    c = {}
    for line in text.splitlines():
        if not line.startswith("xbd-back: vbd") or "=" not in line:
            continue
        if not re.search(r"\b(rd_req|errors|io_submit|grant_map)=", line):
            continue
        for k, v in COUNTER_RE.findall(line):
            c[k] = c.get(k, 0) + int(v)
    return c


def parse_strace(path):
    """strace -c's table: {syscall: calls}, and the total."""
    calls, total = {}, None
    try:
        with open(path) as fh:
            for line in fh:
                f = line.split()
                if len(f) >= 5 and re.match(r"^[\d.]+$", f[0]) and f[3].isdigit():
                    if f[-1] == "total":
                        total = int(f[3])
                    else:
                        calls[f[-1]] = int(f[3])
    except OSError:
        return None, None
    return calls, total


def run_group(cmd, timeout, env=None):
    """Run cmd in its own process group; on timeout kill the whole group, so
    that no client started by xbd-back --run outlives a hung run."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.communicate()
        raise


def parse_front(text):
    """The figures of xbd-front bench's text report (it has the library's
    notification count, which --json lacks)."""
    pats = dict(iops=r"iops: ([\d.]+) \(read (\d+), write (\d+)\)",
                lat=r"lat \(us\): p50 ([\d.]+)\s+p99 ([\d.]+)",
                cpu_s=r"cpu: ([\d.]+) s",
                ring=r"ring requests: (\d+) \((\d+) indirect\), notifies: (\d+)",
                errors=r"errors: (\d+)")
    m = {k: re.search(p, text) for k, p in pats.items()}
    if not m["iops"] or not m["lat"]:
        return None
    r = dict(iops=float(m["iops"].group(1)),
             ios=int(m["iops"].group(2)) + int(m["iops"].group(3)),
             p50=float(m["lat"].group(1)), p99=float(m["lat"].group(2)),
             cpu_s=float(m["cpu_s"].group(1)) if m["cpu_s"] else None,
             errors=int(m["errors"].group(1)) if m["errors"] else 0)
    if m["ring"]:
        r["ring_requests"] = int(m["ring"].group(1))
        r["notifies"] = int(m["ring"].group(3))
    return r


# ---- single runs ------------------------------------------------------------

class Runner:
    def __init__(self, args, host, work, files):
        self.a = args
        self.host = host
        self.work = work
        self.files = files
        self.n = 0
        self.wrapper = os.path.join(work, "asguest")
        with open(self.wrapper, "w") as f:
            f.write(WRAPPER)
        os.chmod(self.wrapper, 0o755)
        self.back = os.path.join(args.builddir, "blkback/xbd-back")
        self.front = os.path.join(args.builddir, "blkfront/xbd-front")
        self.xbdctl = os.path.join(args.builddir, "xbdctl/xbdctl")
        self.plugin = os.path.join(args.builddir, "blkfront/.libs/nbdkit-xbd-plugin.so")
        self.direct = {}
        # Newer xbd-back: no control socket at the system path, no system config file.
        help_text = subprocess.run([self.back, "--help"], capture_output=True,
                                   text=True).stdout
        self.back_common = []
        # Pinned, the backend and the guest run on different CPUs, as dom0 and a
        # guest vCPU do on Xen.  Unpinned on 2 CPUs, the scheduler often runs both
        # on one CPU, where they take turns by preemption and the backend never
        # sleeps between QD1 requests: no wake-up for polling to save.  But pinned,
        # every QD32 hand-over costs a cross-CPU wake-up, and throughput halves
        # here.  So by default (BENCH_PIN=qd1) only QD1 rows are pinned.
        self.can_pin = bool(shutil.which("taskset")) and (os.cpu_count() or 1) >= 2
        front_help = subprocess.run([self.front, "bench", "--help"], capture_output=True,
                                    text=True).stdout
        self.front_fua = "--fua" in front_help

    def pinned(self, wl):
        if not self.can_pin or not wl:
            return False
        return self.a.pin == "1" or (self.a.pin == "qd1" and wl["qd"] == 1)
        if "--control" in help_text:
            self.back_common += ["--control", "none"]
        if "--config" in help_text:
            self.back_common += ["--config", "/dev/null"]

    def fio_direct(self, path):
        """O_DIRECT where the filesystem takes it (tmpfs does since Linux 6.6)."""
        if path not in self.direct:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
                os.close(fd)
                self.direct[path] = 1
            except OSError:
                self.direct[path] = 0
        return self.direct[path]

    def fio(self, wl, tgt, variant):
        if not self.a.fio:
            return dict(error="fio not found")
        pin_fio = ["taskset", "-c", "1"] if self.pinned(wl) else []
        cmd = pin_fio + [self.a.fio, "--name=bench", "--rw=" + wl["rw"], "--bs=" + wl["bs"],
               "--iodepth=%d" % wl["qd"], "--runtime=%g" % self.a.runtime, "--time_based",
               "--output-format=json", "--lat_percentiles=1", "--norandommap",
               "--randrepeat=0"]
        env = None
        if tgt == "null":
            cmd += ["--ioengine=null", "--size=%dM" % self.a.size_mb]
        elif tgt == "nbd":
            cmd += ["--ioengine=nbd", "--uri=" + self.files["nbd_uri"]]
        elif tgt == "rbd":
            cmd += ["--ioengine=rbd", "--clientname=admin", "--pool=rbd",
                    "--rbdname=" + self.files["rbd_image"]]
            env = dict(os.environ, CEPH_CONF=self.files["ceph_conf"])
        else:
            path = self.files[tgt]
            cmd += ["--ioengine=libaio", "--filename=" + path,
                    "--direct=%d" % self.fio_direct(path)]
        if variant == "fio-fdatasync":
            cmd += ["--fdatasync=1"]
        elif wl.get("sync"):
            cmd += ["--sync=dsync"]
        try:
            _, stdout, _ = run_group(cmd, self.a.runtime + 20, env=env)
            j = json.loads(stdout[stdout.index("{"):])["jobs"][0]
        except subprocess.TimeoutExpired:
            return dict(error="fio: no result 20s after its runtime (storage stalled?)")
        except (ValueError, KeyError, IndexError) as e:
            return dict(error="fio: %s" % e)
        d = j["write"] if wl["rw"] in ("write", "randwrite") else j["read"]
        secs = j["job_runtime"] / 1000.0 or self.a.runtime
        ios = d["total_ios"]
        cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * secs
        pct = d.get("lat_ns", {}).get("percentile", {})
        return dict(iops=d["iops"], p50_us=pct.get("50.000000", 0) / 1000.0,
                    p99_us=pct.get("99.000000", 0) / 1000.0,
                    front_cpu_us_per_io=cpu / ios * 1e6 if ios else None, ios=ios)

    def xbd(self, wl, tgt, variant, idle=None):
        self.n += 1
        out = os.path.join(self.work, "run%d" % self.n)
        pin = self.pinned(wl)
        back = ((["taskset", "-c", "0"] if pin else []) + [self.back, "-v", "-v"]
                + self.back_common + XBD_CONFIGS[variant])
        fua = ""
        if wl and wl.get("sync") and not variant.startswith("wthru"):
            if self.front_fua:
                fua = " --fua"
            else:
                back += ["--cache", "writethrough"]
        vdev = self.host.vdev[tgt]
        if idle:
            run = "%s %d %s idle %g %s" % (self.wrapper, self.host.dom, out, idle, vdev)
        else:
            run = ("%s %d %s %s bench --vdev %s --queues 1 --rw %s --bs %s --iodepth %d "
                   "--runtime %g%s" % (self.wrapper, self.host.dom, out, self.front, vdev,
                                              wl["rw"], wl["bs"], wl["qd"], self.a.runtime, fua))
        strace = shutil.which("strace") if variant in SYSCALL_CONFIGS else None
        if variant in SYSCALL_CONFIGS and not strace:
            return dict(error="strace not installed: no syscall count")
        env = dict(self.host.env0, XBD_BENCH_SIM=self.host.sim,
                   XBD_BENCH_FRONT_CPU="1" if pin else "", XBD_BENCH_STRACE=strace or "",
                   XBD_BENCH_SIMDIR=self.host.dir, XBD_BENCH_PLUGIN=self.plugin,
                   XBD_BENCH_XBDCTL=self.xbdctl if variant in CHECKPOINT_CONFIGS else "",
                   NBDKIT=self.a.nbdkit or "nbdkit")
        try:
            rc, stdout, stderr = run_group(back + ["--run", run],
                                           self.a.runtime + (idle or 0) + 20, env=env)
        except subprocess.TimeoutExpired:
            return dict(error="xbd: no result 20s after its runtime (storage stalled?)")
        cpu0, cpu1 = ticks(out + ".t0"), ticks(out + ".t1")
        back_cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
        sys_calls, sys_total = parse_strace(out + ".strace") if strace else (None, None)
        for suf in (".t0", ".t1", ".strace", ".strace-err"):
            if os.path.exists(out + suf):
                os.unlink(out + suf)
        if idle:
            if rc or back_cpu is None:
                return dict(error="idle run failed (%d): %s" % (rc, stderr[-300:]))
            return dict(idle_s=idle, back_cpu_s=back_cpu)
        j = parse_front(stdout)
        if j is None:
            return dict(error="xbd run failed (%d): %s" % (rc, stderr[-400:]))
        if rc or j.get("errors"):
            return dict(error="xbd-front bench: %d errors, exit %d: %s"
                        % (j.get("errors", 0), rc, stderr[-300:]))
        c = parse_counters(stderr)
        reqs = sum(c.get(k, 0) for k in ("rd_req", "wr_req", "f_req", "ds_req", "barrier_req"))
        r = dict(iops=j["iops"], p50_us=j["p50"], p99_us=j["p99"], ios=j["ios"],
                 front_cpu_s=j["cpu_s"], back_cpu_s=back_cpu, ring_requests=reqs,
                 front_requests=j.get("ring_requests"), front_notifies=j.get("notifies"),
                 counters=c)
        if reqs:
            sub = c.get("io_submit", 0)
            r.update(
                submit_per_req=sub / reqs,
                mean_batch=c.get("submitted", 0) / sub if sub else None,
                compl_per_reap=(c.get("reaped", 0) / c["reap_calls"]
                                if c.get("reap_calls") else None),
                # What the frontend sent: the backend's notify_recv counts wake-ups
                # (the simulator, like Xen, coalesces notifications while pending).
                ntf_in_per_req=(j["notifies"] / reqs if j.get("notifies") is not None
                                else c.get("notify_recv", 0) / reqs),
                wake_in_per_req=c.get("notify_recv", 0) / reqs,
                ntf_out_per_req=c.get("notify_sent", 0) / reqs,
                grant_per_req=(c.get("grant_map", 0) + c.get("grant_copy", 0)
                               + c.get("grant_unmap", 0)) / reqs,
                back_cpu_us_per_req=back_cpu / reqs * 1e6 if back_cpu is not None else None,
                front_cpu_us_per_req=j["cpu_s"] / reqs * 1e6 if j.get("cpu_s") is not None
                else None)
        if strace:
            if not sys_total or not reqs:
                return dict(error="strace counted nothing: %s" % stderr[-200:])
            r.update(syscalls=sys_calls, syscalls_total=sys_total,
                     syscalls_per_req=sys_total / reqs)
        return r


# ---- the sweep --------------------------------------------------------------

def plan(only, front_fua):
    """(workload, target) -> ordered list of configs to run in each sweep."""
    rows = {}
    for wl in WORKLOADS:
        for t in TARGETS + ENGINE_TARGETS:
            if t in ENGINE_TARGETS and wl["name"] not in ENGINE_WORKLOADS:
                continue
            if only and not ({wl["name"], t, "%s:%s" % (wl["name"], t)} & only):
                continue
            rows[(wl["name"], t)] = ["fio", "xbd"]
    for ab in AB:
        if ab.get("fua") and not front_fua:
            continue
        for key in ab["rows"]:
            if key in rows:
                for c in (ab["a"], ab["b"]):
                    if c not in rows[key]:
                        rows[key].append(c)
    for key in ENGINE_ROWS:
        if key in rows:
            rows[key] += list(SYSCALL_CONFIGS)
    return rows


class EngineStorage:
    """The NBD server and the Ceph cluster the engine rows need, started
    only when the plan has those rows; stop() ends them."""

    def __init__(self, work, size_mb, wanted, srcdir):
        self.work, self.procs, self.params, self.files, self.errors = work, [], {}, {}, {}
        self.ceph_dir = None
        self.cluster = os.path.join(srcdir, "tests/lib/ceph-cluster.sh")
        if "nbd" in wanted:
            self.start_nbd(size_mb)
        if "rbd" in wanted:
            self.start_rbd(size_mb)

    def start_nbd(self, size_mb):
        nbdkit = shutil.which("nbdkit")
        if not nbdkit:
            self.errors["nbd"] = "nbdkit not installed"
            return
        f = tempfile.mktemp(prefix="xbd-bench-nbd.", dir="/dev/shm")
        fill_file(f, size_mb)
        self.files["nbd_file"] = f
        sock = os.path.join(self.work, "nbd.sock")
        p = subprocess.Popen([nbdkit, "-f", "-U", sock, "file", f],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        self.files["nbd_uri"] = "nbd+unix:///?socket=" + sock
        self.params["nbd"] = self.files["nbd_uri"]

    def start_rbd(self, size_mb):
        self.ceph_dir = tempfile.mkdtemp(prefix="ceph.")
        r = subprocess.run(["sh", self.cluster, "start", self.ceph_dir,
                            str(max(1 << 30, 3 * size_mb << 20))],
                           capture_output=True, text=True)
        if r.returncode:
            self.errors["rbd"] = ("Ceph not installed" if r.returncode == 77 else
                                  "the Ceph test cluster did not start: %s" % r.stderr[-200:])
            return
        conf = os.path.join(self.ceph_dir, "ceph.conf")
        # librbd's cache off for both sides: fio never flushes, so its librbd
        # would ack writes from the cache (p50 ~80 us) while xbd's, whose guest
        # flushes, waits for the OSD; without it both measure the same path.
        with open(conf, "a") as fc:
            fc.write("[client]\nrbd cache = false\n")
        env = dict(os.environ, CEPH_CONF=conf)
        src = tempfile.mktemp(prefix="xbd-bench-rbd.", dir="/dev/shm")
        fill_file(src, size_mb)
        r = subprocess.run(["rbd", "import", "--no-progress", src, "rbd/bench"], env=env,
                           capture_output=True, text=True)
        os.unlink(src)
        if r.returncode:
            self.errors["rbd"] = "rbd import failed: %s" % r.stderr[-200:]
            return
        self.files.update(ceph_conf=conf, rbd_image="bench")
        self.params["rbd"] = "rbd:rbd/bench:conf=" + conf

    def stop(self):
        for p in self.procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.files.get("nbd_file") and os.path.exists(self.files["nbd_file"]):
            os.unlink(self.files["nbd_file"])
        if self.ceph_dir:
            subprocess.run(["sh", self.cluster, "stop", self.ceph_dir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fill_file(path, size_mb):
    """Random data, so that nothing reads holes or unwritten extents."""
    chunk = 1 << 20
    with open(path, "wb") as f:
        for _ in range(size_mb):
            f.write(os.urandom(chunk))
        f.flush()
        os.fsync(f.fileno())


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def block_queue(path):
    """The FUA support and cache mode of the block device under path: they
    decide whether an O_DSYNC/RWF_DSYNC write can be cheaper than write+flush."""
    try:
        dev = os.stat(path).st_dev
        base = "/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev))
        q = os.path.join(base, "queue")
        if not os.path.isdir(q):
            q = os.path.join(base, "..", "queue")  # a partition
        out = dict(device=os.path.basename(os.path.realpath(base)))
        for k in ("fua", "write_cache", "rotational"):
            with open(os.path.join(q, k)) as fh:
                out[k] = fh.read().strip()
        return out
    except (OSError, ValueError):
        return None


def fs_type(path):
    try:
        return subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return "?"


def summarise(samples):
    """Medians of every numeric field over the sweeps."""
    ok = [s for s in samples if "error" not in s]
    out = dict(n=len(ok), errors=[s["error"] for s in samples if "error" in s])
    if not ok:
        return out
    keys = set()
    for s in ok:
        keys.update(k for k, v in s.items() if isinstance(v, (int, float)))
    for k in sorted(keys):
        out[k] = median([s.get(k) for s in ok])
    out["iops_min"] = min(s["iops"] for s in ok) if "iops" in ok[0] else None
    out["iops_max"] = max(s["iops"] for s in ok) if "iops" in ok[0] else None
    return out


def paired_ratio(sa, sb, metric):
    """Median over sweeps of A/B, taken within each sweep."""
    rs = []
    for a, b in zip(sa, sb):
        if "error" in a or "error" in b:
            continue
        x, y = a.get(metric), b.get(metric)
        if x and y:
            rs.append(x / y)
    if not rs:
        return None
    return dict(median=statistics.median(rs), min=min(rs), max=max(rs), n=len(rs))


# ---- output -----------------------------------------------------------------

def k(v):
    if v is None:
        return "n/a"
    if v >= 1e6:
        return "%.2fM" % (v / 1e6)
    if v >= 1e3:
        return "%.1fk" % (v / 1e3)
    return "%.0f" % v


def fmt_ratio(v, star=""):
    """A ratio in a 7-wide column; a run that stalled can make it absurd."""
    if v is None:
        return "n/a"
    if v >= 1000:
        return ">999" + star
    return ("%.0f" if v >= 100 else "%.2f") % v + star


def us(v):
    """A latency in a narrow column: thousands of us as k."""
    if v is None:
        return "n/a"
    return "%.0fk" % (v / 1e3) if v >= 10000 else "%.0f" % v


def f(v, fmt="%.2f"):
    return "n/a" if v is None else fmt % v


def print_tables(res, out):
    W = lambda s="": print(s, file=out)
    wl_label = {w["name"]: w["label"] for w in WORKLOADS}
    m, cf = res["machine"], res["config"]
    W("xbd bench %s, %s, %d CPUs, load %.1f, %gs x %d sweeps%s" % (
        m["date"][:16], m["cpu_model"][:28], m["cpus"], m["loadavg"][0], cf["runtime_s"],
        cf["repeat"], {"qd1": ", QD1 pinned", "1": ", pinned"}.get(cf.get("pinned"), "")))
    if cf.get("last_sweep_cut_short"):
        W("(BENCH_BUDGET ran out: the last sweep is incomplete)")
    W()
    W("1. IOPS: fio libaio on the backing file (physical limit) vs xbd (xbd-front bench, 1 queue);")
    W("   nbd/rbd rows: fio's own nbd/rbd engine on the same export/image vs xbd-back's engine.")
    W("   p50us f/x: median latency fio/xbd in us (k: 1000 us).  A/B ratios, median of the")
    W("   per-sweep ratios ('-' = not run for that row):")
    W("   b32/b1 IOPS max-batch 32/1; poll p50 latency polling on/off; pers IOPS persistent")
    W("   grants on/off; jrnl IOPS crash journal on/off; dsy/fd sync-write IOPS, writethrough's")
    W("   writes with RWF_DSYNC / each write + fdatasync (table 3: more, grant map/copy too);")
    W("   ur/aio IOPS engine = uring / engine = aio (the default) on the files (disk, shm).")
    hdr = "%-17s %-4s %7s %7s %5s %9s" % ("workload", "tgt", "fio", "xbd", "x/fio", "p50us f/x")
    cols = [ab for ab in AB if not ab.get("hidden")]
    for ab in cols:
        hdr += " %6s" % ab["head"][:6]
    W(hdr)
    W("-" * len(hdr))
    for row in res["rows"]:
        fio, xbd = row["configs"].get("fio", {}), row["configs"].get("xbd", {})
        ratio = (xbd.get("iops") / fio["iops"]) if fio.get("iops") and xbd.get("iops") else None
        lat = "%s/%s" % (us(fio.get("p50_us")), us(xbd.get("p50_us")))
        line = "%-17s %-4s %7s %7s %5s %9s" % (wl_label[row["workload"]], row["target"],
                                                k(fio.get("iops")), k(xbd.get("iops")),
                                                f(ratio), lat)
        for ab in cols:
            r = row["ab"].get(ab["col"])
            if ab["col"] not in row["ab"]:
                cell = "n/a" if (ab.get("fua") and (row["workload"], row["target"])
                                 in ab["rows"]) else "-"
            else:
                cell = fmt_ratio(r["median"]) if r else "n/a"
            line += " %6s" % cell
        W(line)
    if res.get("front_fua"):
        W("   syncwrite: fio --sync=dsync (O_DSYNC); xbd-front --fua (write + flush per write).")
    else:
        W("   syncwrite: fio --sync=dsync; xbd-back --cache writethrough (RWF_DSYNC, no --fua).")
    W()
    W("2. Per ring request, xbd default settings (backend counters; CPU from /proc and rusage)")
    hdr = "%-17s %-4s %7s %5s %6s %6s %6s %6s %5s %6s %7s %6s" % (
        "workload", "tgt", "sub/req", "batch", "c/reap", "ntf in", "wakes", "out", "gnt",
        "backus", "frontus", "fio us")
    W(hdr)
    W("-" * len(hdr))
    for row in res["rows"]:
        x = row["configs"].get("xbd", {})
        fio = row["configs"].get("fio", {})
        W("%-17s %-4s %7s %5s %6s %6s %6s %6s %5s %6s %7s %6s" % (
            wl_label[row["workload"]], row["target"], f(x.get("submit_per_req"), "%.3f"),
            f(x.get("mean_batch"), "%.1f"), f(x.get("compl_per_reap"), "%.1f"),
            f(x.get("ntf_in_per_req"), "%.3f"), f(x.get("wake_in_per_req"), "%.3f"),
            f(x.get("ntf_out_per_req"), "%.3f"),
            f(x.get("grant_per_req"), "%.2f"), f(x.get("back_cpu_us_per_req"), "%.2f"),
            f(x.get("front_cpu_us_per_req"), "%.2f"), f(fio.get("front_cpu_us_per_io"), "%.2f")))
    W("   sub/req io_submit calls, batch iocbs per io_submit, c/reap completions per reap call,")
    W("   ntf in notifications sent by xbd-front, wakes xbd-back wake-ups by one, out sent by")
    W("   xbd-back, gnt grant map+unmap+copy calls,")
    W("   backus/frontus CPU us (user+sys) of xbd-back / xbd-front, fio us: fio's CPU per I/O.")
    eng = [r for r in res["rows"] if "xbd-sys" in r["configs"] or "uring-sys" in r["configs"]]
    if eng:
        W("   System calls per ring request, engine = aio / engine = uring (strace -f -c on every")
        W("   thread of xbd-back; a counting run of its own per engine, first sweep only):")
        hdr = "   %-17s %-4s %6s %6s %5s  %s" % ("workload", "tgt", "aio", "uring", "u/a",
                                              "the calls made most, per request")
        W(hdr)
        for row in eng:
            sa = row["configs"].get("xbd-sys", {}).get("syscalls_per_req")
            su = row["configs"].get("uring-sys", {}).get("syscalls_per_req")

            def top(c):
                ss = [x for x in row["samples"].get(c, []) if "syscalls" in x]
                if not ss:
                    return "n/a"
                n = ss[0]["ring_requests"]
                calls = sorted(ss[0]["syscalls"].items(), key=lambda kv: -kv[1])[:3]
                return " ".join("%s %.2f" % (name.replace("io_uring_", "u_"), v / n)
                                for name, v in calls)
            W("   %-17s %-4s %6s %6s %5s  %s" % (
                wl_label[row["workload"]], row["target"], f(sa, "%.3f"), f(su, "%.3f"),
                f(su / sa if sa and su else None), ("uring: " + top("uring-sys"))[:52]))
            W("   %-17s %-4s %6s %6s %5s  %s" % ("", "", "", "", "",
                                              ("  aio: " + top("xbd-sys"))[:52]))
    W()
    W("3. A/B pairs: medians of A and B, and the within-sweep ratio A/B (median [min..max])")
    hdr = "%-6s %-17s %-4s %9s %9s %20s %5s %5s %6s %6s" % (
        "A/B", "workload", "tgt", "A", "B", "A/B", "bat A", "bat B", "cpuA", "cpuB")
    W(hdr)
    W("-" * len(hdr))
    for row in res["rows"]:
        for ab in AB:
            r = row["ab"].get(ab["col"])
            if r is None and ab["col"] not in row["ab"]:
                continue
            A, B = row["configs"].get(ab["a"], {}), row["configs"].get(ab["b"], {})
            m = ab["metric"]
            unit = "%.1f" if m == "p50" else None
            va, vb = (A.get("p50_us"), B.get("p50_us")) if m == "p50" else (A.get("iops"),
                                                                           B.get("iops"))
            rr = ("%s [%s..%s]" % (fmt_ratio(r["median"]), fmt_ratio(r["min"]), fmt_ratio(r["max"]))
                  if r else "n/a")
            W("%-6s %-17s %-4s %9s %9s %20s %5s %5s %6s %6s" % (
                ab["col"], wl_label[row["workload"]], row["target"],
                us(va) if unit else k(va), us(vb) if unit else k(vb), rr,
                f(A.get("mean_batch"), "%.1f"), f(B.get("mean_batch"), "%.1f"),
                f(A.get("back_cpu_us_per_req"), "%.2f"), f(B.get("back_cpu_us_per_req"), "%.2f")))
    W("   A, B: p50 latency in us for poll, IOPS otherwise; bat: mean io_submit batch;")
    W("   cpu: xbd-back CPU us per request.  fua: every write durable (writethrough), A with")
    W("   RWF_DSYNC, B write + fdatasync (--fua-mode fdatasync); fuabar: the same A/B for")
    W("   barrier-mode FUA writes; fuapath: A writethrough, B flush-cache FUA (write + flush);")
    W("   fuafio: fio alone, A O_DSYNC, B write + fdatasync; cbt: A changed-block tracking")
    W("   (--cbt 1), B without (the default).")
    idle = res.get("idle", {})
    if idle:
        W("   idle (attached, no I/O): xbd-back CPU %s%% of a CPU with polling, %s%% without"
          % (f(idle.get("poll_on_pct"), "%.2f"), f(idle.get("poll_off_pct"), "%.2f")))
    W()
    W("4. Targets (issue 10; on shm unless said)")
    for t in res["targets"]:
        if not t["verdict"]:
            W("   %-5s %s" % ("", t["what"][:88]))
            continue
        W("   %-5s %-66s %s" % (t["verdict"], t["what"][:66], t["value"]))
    W()
    W("missing options:")
    for m in MISSING:
        W(textwrap.fill(m, 98, initial_indent="   - ", subsequent_indent="     "))


def targets(res):
    def row(w, t):
        for r in res["rows"]:
            if r["workload"] == w and r["target"] == t:
                return r
        return None

    def cfg(w, t, c, key):
        r = row(w, t)
        return r["configs"].get(c, {}).get(key) if r else None

    def ab(w, t, col):
        r = row(w, t)
        x = r["ab"].get(col) if r else None
        return x["median"] if x else None

    out = []

    def add(what, value, ok, fmt="%.2f"):
        out.append(dict(what=what, value=f(value, fmt),
                        verdict="n/a" if value is None else ("PASS" if ok(value) else "MISS")))

    fio, xbd = cfg("rr32", "shm", "fio", "iops"), cfg("rr32", "shm", "xbd", "iops")
    add("xbd 4k randread QD32 >= 0.7x fio libaio IOPS",
        xbd / fio if fio and xbd else None, lambda v: v >= 0.7)
    add("mean io_submit batch at QD32 >= 8", cfg("rr32", "shm", "xbd", "mean_batch"),
        lambda v: v >= 8, "%.1f")
    add("notifications received per request at QD32 <= 0.25",
        cfg("rr32", "shm", "xbd", "ntf_in_per_req"), lambda v: v <= 0.25, "%.3f")
    add("notifications sent per request at QD32 <= 0.25",
        cfg("rr32", "shm", "xbd", "ntf_out_per_req"), lambda v: v <= 0.25, "%.3f")
    add("max-batch 32 over 1, IOPS at QD32 >= 1.15", ab("rr32", "shm", "batch"),
        lambda v: v >= 1.15)
    add("max-batch 32/1 on the null engine (no syscall to save) >= 1.15",
        ab("rr32", "null", "batch"), lambda v: v >= 1.15)
    add("polling on/off, QD1 p50 latency <= 0.75", ab("rr1", "shm", "poll"),
        lambda v: v <= 0.75)
    add("crash journal on/off, 4k randread QD32 on the null engine >= 0.97",
        ab("rr32", "null", "journal"), lambda v: v >= 0.97)
    for w, lbl in (("rr32", "randread"), ("rw32", "randwrite")):
        add("tracking (cbt) on/off, 4k %s QD32, null engine >= 0.97" % lbl,
            ab(w, "null", "cbt"), lambda v: v >= 0.97)
    add("engine = uring over aio, 4k randread QD32 IOPS on the disk file >= 1.0",
        ab("rr32", "disk", "uring"), lambda v: v >= 1.0)
    sa, su = cfg("rr32", "disk", "xbd-sys", "syscalls_per_req"), cfg("rr32", "disk", "uring-sys",
                                                                   "syscalls_per_req")
    add("system calls per request, uring over aio, 4k randread QD32 on the disk <= 0.5",
        su / sa if sa and su else None, lambda v: v <= 0.5)
    idle = res.get("idle", {}).get("poll_on_pct")
    add("polling costs no CPU when idle (xbd-back % of a CPU < 1)", idle, lambda v: v < 1.0)
    add("sync write: RWF_DSYNC over write + fdatasync (fua-mode), disk >= 1.15",
        ab("sw1", "disk", "fua"), lambda v: v >= 1.15)
    add("same, raw: fio O_DSYNC over write + fdatasync on the disk",
        ab("sw1", "disk", "fuafio"), lambda v: v >= 1.15)
    for t, name in (("nbd", "NBD (nbdkit file on /dev/shm)"), ("rbd", "RBD (memstore Ceph)")):
        for w, lbl in (("rr32", "randread"), ("rw32", "randwrite")):
            fio, xbd = cfg(w, t, "fio", "iops"), cfg(w, t, "xbd", "iops")
            add("xbd on %s 4k %s QD32 >= 0.9x fio's %s engine" % (name, lbl, t),
                xbd / fio if fio and xbd else None, lambda v: v >= 0.9)
    q = res["machine"].get("disk_queue")
    if q:
        out.append(dict(what="  (disk %s: fua=%s, %s cache%s)" % (
            q["device"], q["fua"], q["write_cache"],
            ": no FUA, O_DSYNC = write + flush"
            if q["fua"] == "0" and q["write_cache"] == "write back" else ""),
            value="", verdict=""))
    return out


GNUPLOT = r"""
set terminal pngcairo size 1200,950 font "sans,10"
set output '%(png)s'
set multiplot layout 2,1 title "xbd on the simulator vs fio libaio: %(title)s"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set xtics rotate by -30 scale 0
set rmargin 8
set key top right
set logscale y 10
set title "IOPS (median): fio --ioengine=libaio on the target (physical limit) and xbd (xbd-front bench)"
set ylabel "IOPS (log)"
plot '%(dat1)s' using 2:xtic(1) title "fio libaio" lc rgb "#888888", \
     '' using 3 title "xbd" lc rgb "#3b7dd8"
set logscale y 2
set title "A/B within one run (median of per-sweep ratios; >1: the idea helps; poll is p50, <1 helps)"
set ylabel "A / B (log)"
plot '%(dat2)s' using 2:xtic(1) title "A/B" lc rgb "#e08a1e", \
     1 with lines lc rgb "black" notitle, \
     1.15 with lines dt 2 lc rgb "red" title "target 1.15", \
     0.75 with lines dt 3 lc rgb "blue" title "target 0.75 (poll p50)"
unset multiplot
"""


def chart(res, outdir, gnuplot):
    short = {"rr1": "rr1", "rr32": "rr32", "rw32": "rw32", "sw1": "sw1", "sr8": "sr8"}
    dat1 = os.path.join(outdir, "chart-fio.dat")
    dat2 = os.path.join(outdir, "chart-ab.dat")
    n1 = n2 = 0
    with open(dat1, "w") as f1, open(dat2, "w") as f2:
        f1.write("# row fio-iops xbd-iops\n")
        f2.write("# pair A/B\n")
        for row in res["rows"]:
            fio = row["configs"].get("fio", {}).get("iops")
            xbd = row["configs"].get("xbd", {}).get("iops")
            name = "%s-%s" % (short[row["workload"]], row["target"])
            if fio or xbd:
                f1.write('"%s" %s %s\n' % (name, fio or "NaN", xbd or "NaN"))
                n1 += 1
            for ab in AB:
                r = row["ab"].get(ab["col"])
                if r:
                    f2.write('"%s %s" %.4f\n' % (ab["head"], name, r["median"]))
                    n2 += 1
    png = os.path.join(outdir, "chart.png")
    if not gnuplot or not n1 or not n2:
        return None, "gnuplot missing or nothing to plot"
    script = GNUPLOT % dict(png=png, dat1=dat1, dat2=dat2,
                            title="%s, %s" % (res["machine"]["cpu_model"][:30],
                                              res["machine"]["date"][:10]))
    gp = os.path.join(outdir, "chart.gp")
    with open(gp, "w") as f:
        f.write(script)
    p = subprocess.run([gnuplot, gp], capture_output=True, text=True)
    if p.returncode:
        return None, p.stderr.strip()
    return png, None


# ---- main -------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--builddir", default=".")
    ap.add_argument("--out", default=None, help="output directory (default BUILDDIR/bench)")
    ap.add_argument("--runtime", type=float, default=float(os.environ.get("BENCH_RUNTIME", 2)))
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("BENCH_REPEAT", 3)))
    a = ap.parse_args()
    a.builddir = os.path.abspath(a.builddir)
    a.out = os.path.abspath(a.out or os.path.join(a.builddir, "bench"))
    a.size_mb = int(os.environ.get("BENCH_SIZE_MB", 256))
    a.pin = os.environ.get("BENCH_PIN", "qd1")
    # make bench must finish within 10 minutes: no sweep starts that would end past this.
    a.budget = float(os.environ.get("BENCH_BUDGET", 540))
    a.fio = os.environ.get("FIO") or shutil.which("fio")
    if a.fio in ("no", ""):
        a.fio = shutil.which("fio")
    a.nbdkit = os.environ.get("NBDKIT") or shutil.which("nbdkit")
    if a.nbdkit in ("no", ""):
        a.nbdkit = shutil.which("nbdkit")
    only = set(x for x in os.environ.get("BENCH_ONLY", "").split(",") if x)
    for b in ("sim/xbd-sim", "xenstore/xbd-xenstored", "blkback/xbd-back", "blkfront/xbd-front"):
        if not os.access(os.path.join(a.builddir, b), os.X_OK):
            log("bench: %s is not built (run make first)" % b)
            return 2
    os.makedirs(a.out, exist_ok=True)
    disk_dir = os.path.abspath(os.environ.get("BENCH_DISK_DIR", a.out))
    t_start = time.time()
    work = tempfile.mkdtemp(prefix="xbd-bench.")
    shm_file = tempfile.mktemp(prefix="xbd-bench.", dir="/dev/shm")
    disk_file = tempfile.mktemp(prefix="xbd-bench-disk.", dir=disk_dir)
    host = None
    engines = None
    srcdir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    old_term = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        log("bench: filling %d MiB in /dev/shm and on %s (%s)"
            % (a.size_mb, disk_dir, fs_type(disk_dir)))
        fill_file(shm_file, a.size_mb)
        fill_file(disk_file, a.size_mb)
        wanted = set(t for (_, t) in plan(only, True) if t in ENGINE_TARGETS)
        if wanted:
            log("bench: starting the storage for %s" % ", ".join(sorted(wanted)))
        engines = EngineStorage(work, a.size_mb, wanted, srcdir)
        host = Host(a.builddir, work, shm_file, disk_file, a.size_mb, extra=engines.params)
        runner = Runner(a, host, work, dict(shm=shm_file, disk=disk_file, **engines.files))
        rows = plan(only, runner.front_fua)
        for key in list(rows):
            if key[1] in engines.errors:
                log("bench: %s rows not run: %s" % (key[1], engines.errors[key[1]]))
                del rows[key]
        wls = {w["name"]: w for w in WORKLOADS}
        samples = {key: {c: [] for c in cfgs} for key, cfgs in rows.items()}
        idle_on, idle_off = [], []
        total = sum(len([x for x in c if x not in SYSCALL_CONFIGS]) * a.repeat
                    + len([x for x in c if x in SYSCALL_CONFIGS]) for c in rows.values())
        done = 0
        sweeps = 0
        sweep_s = 0.0
        partial = False
        hung = set()
        for rep in range(a.repeat):
            t_sweep = time.time()
            if rep and (t_sweep - t_start) + sweep_s > a.budget:
                log("bench: stopping after %d sweeps: another would pass BENCH_BUDGET=%gs"
                    % (rep, a.budget))
                break
            for key, cfgs in rows.items():
                order = cfgs if rep % 2 == 0 else list(reversed(cfgs))
                for c in order:
                    if time.time() - t_start > a.budget:
                        break
                    wl = wls[key[0]]
                    if c in SYSCALL_CONFIGS and rep:
                        continue  # counted once, in the first sweep
                    if (key, c) in hung:
                        s = dict(error="not run: timed out in an earlier sweep")
                    elif c.startswith("fio"):
                        s = runner.fio(wl, key[1], c)
                    else:
                        s = runner.xbd(wl, key[1], c)
                    if "no result" in s.get("error", "") and c != "fio" and c != "fio-fdatasync":
                        hung.add((key, c))  # xbd hung there: do not spend the budget on it
                    samples[key][c].append(s)
                    done += 1
                    log("bench: [%d/%d %3.0fs] sweep %d %-5s %-4s %-13s %s" % (
                        done, total, time.time() - t_start, rep + 1, key[0], key[1], c,
                        s.get("error") or "%s IOPS p50 %.1f us" % (k(s.get("iops")),
                                                                  s.get("p50_us") or 0)))
            if (a.nbdkit and os.path.exists(runner.plugin) and (not only or "idle" in only)
                    and time.time() - t_start < a.budget):
                for c, lst in ((("xbd", idle_on), ("nopoll", idle_off)) if rep % 2 == 0
                               else (("nopoll", idle_off), ("xbd", idle_on))):
                    s = runner.xbd(None, "shm", c, idle=max(1.0, a.runtime / 2))
                    lst.append(s)
                    log("bench: idle %-6s %s" % (c, s.get("error") or
                                                 "xbd-back %.3f CPU s in %.1f s"
                                                 % (s["back_cpu_s"], s["idle_s"])))
            sweeps += 1
            if time.time() - t_start > a.budget:
                log("bench: BENCH_BUDGET=%gs used up in sweep %d: the rest is not run"
                    % (a.budget, rep + 1))
                partial = True
                break
            sweep_s = time.time() - t_sweep

        res = dict(
            machine=dict(cpu_model=cpu_model(), cpus=os.cpu_count(), kernel=platform.release(),
                         date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                             timespec="seconds"),
                         loadavg=os.getloadavg(), shm_fs=fs_type("/dev/shm"),
                         disk_fs=fs_type(disk_dir), disk_dir=disk_dir,
                         disk_queue=block_queue(disk_dir),
                         fio_direct={t: runner.direct.get(p) for t, p in
                                     (("shm", shm_file), ("disk", disk_file))}),
            config=dict(pinned=a.pin, runtime_s=a.runtime, repeat=sweeps, repeat_asked=a.repeat,
                        last_sweep_cut_short=partial,
                        budget_s=a.budget, size_mb=a.size_mb,
                        only=sorted(only), frontend="xbd-front bench --queues 1",
                        xbd_configs=XBD_CONFIGS,
                        workloads=WORKLOADS, ab=[{x: y for x, y in ab.items() if x != "rows"}
                                                 for ab in AB]),
            missing_options=MISSING + ([] if runner.front_fua else [MISSING_FRONT_FUA]),
            front_fua=runner.front_fua,
            rows=[])
        for (w, t), cfgs in samples.items():
            row = dict(workload=w, target=t, configs={}, ab={}, samples=cfgs)
            for c, ss in cfgs.items():
                row["configs"][c] = summarise(ss)
            for ab in AB:
                if (w, t) in ab["rows"] and ab["a"] in cfgs and ab["b"] in cfgs:
                    m = "p50_us" if ab["metric"] == "p50" else "iops"
                    row["ab"][ab["col"]] = paired_ratio(cfgs[ab["a"]], cfgs[ab["b"]], m)
            res["rows"].append(row)
        ok_on = [s["back_cpu_s"] / s["idle_s"] * 100 for s in idle_on if "error" not in s]
        ok_off = [s["back_cpu_s"] / s["idle_s"] * 100 for s in idle_off if "error" not in s]
        if ok_on or ok_off:
            res["idle"] = dict(poll_on_pct=median(ok_on), poll_off_pct=median(ok_off),
                               samples_on=idle_on, samples_off=idle_off)
        res["targets"] = targets(res)
        res["elapsed_s"] = round(time.time() - t_start, 1)

        jpath = os.path.join(a.out, "results.json")
        with open(jpath, "w") as fjs:
            json.dump(res, fjs, indent=1)
        png, err = chart(res, a.out, shutil.which("gnuplot"))
        tpath = os.path.join(a.out, "table.txt")
        with open(tpath, "w") as ft:
            print_tables(res, ft)
        with open(tpath) as ft:
            sys.stdout.write(ft.read())
        print()
        print("bench: %.0f s; table %s" % (res["elapsed_s"], tpath))
        print("bench: results %s" % jpath)
        print("bench: chart   %s" % (png or "not drawn: %s" % err))
        return 0
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if host:
            host.stop()
        if engines:
            engines.stop()
        for p in (shm_file, disk_file):
            if os.path.exists(p):
                os.unlink(p)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
