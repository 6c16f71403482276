#!/usr/bin/env python3
"""cost-table.py: the counted cost table (make check-xen's count step).

Usage:
  cost-table.py SERIAL-LOG COUNTS [LOGS-DIR] [--bound 'JOB=N ...'] [--json FILE]
  cost-table.py --compare JSON JSON...

SERIAL-LOG holds the count step's XBDT-COUNTING line (where dom0 and the
guests run; arch=, dom0's, names the system calls by its numbers) and
its XBDT-RESULT lines (run=c-...), each naming the two cut marks its
guest ran just before and just after the job's fio (m0=, m1=); COUNTS is what QEMU's plugin (tests/xen/count/
xbd-count.so) wrote: at each cut mark, every emulated CPU's instructions
so far, those counted as polling, and its halts.  dom0's vCPUs are pinned
to the CPUs XBDT-COUNTING names (dom0_cpus=), the guest's to the others
(guest_cpus=), so that the difference between a job's two cuts, summed
over dom0's CPUs, is what dom0 (its kernel, its processes, Xen's work on
its CPUs) did for the job's I/O; over the guest's, what the guest did.

Per backend, persistent-grant setting (run c-pers1, c-pers0) or A/B row
(c-batch1, c-nopoll, c-wt, c-wtfd, c-uring, c-copy, c-copyur) and job, the medians over the counted
rounds (round t, traced, is left out of the instructions):
  dom0 and guest instructions per I/O (thousands), the share of dom0's
  counted as xbd-back's polling, the rounds' spread, dom0's ratio to
  kernel blkback's same job;
  transitions per I/O: from the traced round, dom0's hypercalls (all;
  grant operations map, unmap and copy; mmuext operations, the TLB
  flushes and page-table pins), the guest's event_channel_op calls (its
  notifications), and xbd-back's system calls; from the counted rounds,
  the backend's event-channel interrupts (the guest's notifications that
  woke dom0), the guest's blkif interrupts (the backend's that woke it),
  dom0's context switches, page faults and halts of its CPUs;
  wall time, labelled as such: IOPS, fio's p50, dom0's CPU time per I/O.
The idle job reads per second: what dom0 and Xen did with no I/O.

A job whose window holds a mark of dom0's harness (65500: done with the
job's begin; 65501: begun with its result) had harness work counted in it,
and is flagged.  Exits 1 when a job of 1000 I/Os or more counted no
instruction on dom0's or the guest's CPUs, a cut is missing, or xbd-back's
dom0 instructions per I/O (run c-pers1) pass a --bound; 0 otherwise.
--json writes every cell; --compare prints the cells of several boots'
JSON files side by side with their spread, and exits 1 when an
instruction or transition cell differs by more than 5% between them.
"""
import importlib.util
import json
import os
import statistics
import sys

MARK_READY, MARK_RESULT = 65500, 65501
BACKENDS = {"blkback": 0, "xbd": 1, "qdisk": 2}
JOBS = ["verify", "idle", "rand4k32", "rand4k", "seq128k", "qd1", "wr4k1"]
RUNS = ["c-pers1", "c-pers0", "c-batch1", "c-nopoll", "c-wt", "c-wtfd", "c-uring", "c-copy", "c-copyur"]
# the cells --compare holds to 5%: counts, not wall time
COUNTED = ("d0_k", "net_k", "g_k", "xen_k", "kern_k", "user_k", "poll_pct", "spin_pct", "hc", "gnt_map", "gnt_unmap", "gnt_copy", "mmuext",
           "g_evtchn", "sys", "bntf", "girq", "ctxt", "pgf", "forks", "halts")


def sibling(name):
    """A script beside this one, as a module (its name has a dash)."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), os.path.join(here, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# a result line's key=value words, and a number or None: as the side-by-side table reads them
fields = sibling("ilv-table").fields
num = sibling("ilv-table").num


def cpus(spec):
    """'0-1' or '2' or '0+1' -> [0, 1]."""
    out = []
    for part in spec.replace("+", ",").split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def read_counts(path):
    """mark -> list of (host_ns, {cpu: (insns, poll, halts, xen, kernel, user, spin, spin's xen, kernel,
    user)}), in file order.  A line is "cut MARK CPU HOST_NS N F" and F counts a CPU (the plugin's
    first lines had no F and 3 counts: insns, poll, halts; then 7, without spin's split: None)."""
    cuts = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) < 5 or w[0] != "cut":
                continue
            mark, ns, n = int(w[1]), int(w[3]), int(w[4])
            if len(w) == 5 + 3 * n:
                k, vals = 3, list(map(int, w[5:]))
            else:
                k, vals = int(w[5]), list(map(int, w[6:]))
            per = {i: tuple(vals[k * i:k * i + k]) + (0,) * (7 - k) + (None,) * (10 - max(k, 7))
                   for i in range(len(vals) // k)}
            cuts.setdefault(mark, []).append((ns, per))
    return cuts


# x86-64's numbers of the system calls a backend makes (the traced round's scid=)
SYSCALLS = {0: "read", 1: "write", 3: "close", 7: "poll", 9: "mmap", 10: "mprotect", 11: "munmap",
            13: "rt_sigaction", 14: "rt_sigprocmask", 16: "ioctl", 17: "pread64", 18: "pwrite64",
            19: "readv", 20: "writev", 24: "sched_yield", 35: "nanosleep", 39: "getpid", 74: "fsync",
            75: "fdatasync", 186: "gettid", 202: "futex", 206: "io_setup", 208: "io_getevents",
            209: "io_submit", 210: "io_cancel", 228: "clock_gettime", 230: "clock_nanosleep",
            232: "epoll_wait", 233: "epoll_ctl", 281: "epoll_pwait", 290: "eventfd2", 295: "preadv",
            296: "pwritev", 327: "preadv2", 328: "pwritev2", 426: "io_uring_enter", 441: "epoll_pwait2"}
# arm64's (the generic table of asm-generic/unistd.h: no poll, no epoll_wait)
SYSCALLS_ARM64 = {0: "io_setup", 2: "io_submit", 3: "io_cancel", 4: "io_getevents", 19: "eventfd2",
                  21: "epoll_ctl", 22: "epoll_pwait", 29: "ioctl", 57: "close", 63: "read", 64: "write",
                  65: "readv", 66: "writev", 67: "pread64", 68: "pwrite64", 69: "preadv", 70: "pwritev",
                  73: "ppoll", 82: "fsync", 86: "timerfd_settime", 83: "fdatasync", 98: "futex", 101: "nanosleep",
                  113: "clock_gettime", 115: "clock_nanosleep", 124: "sched_yield", 134: "rt_sigaction",
                  135: "rt_sigprocmask", 172: "getpid", 178: "gettid", 215: "munmap", 222: "mmap",
                  226: "mprotect", 286: "preadv2", 287: "pwritev2", 292: "io_pgetevents",
                  426: "io_uring_enter", 441: "epoll_pwait2"}
XBD_KEYS = (("sub", "io_submit", "calls"), ("reap", "completions", "reap_calls"),
            ("gmap", "grants", "map_calls"), ("gcopy", "grants", "copy_calls"),
            ("gunmap", "grants", "unmap_calls"), ("ntfo", "notifications", "sent"),
            ("ntfi", "notifications", "received"), ("pollns", "poll", "ns"),
            ("clk", "clock_reads", None))


def xbd_totals(path):
    """xbd-back's counters in an `xbdctl stats --json` file, every ring summed, or None."""
    try:
        doc = json.load(open(path))
    except (OSError, ValueError):
        return None
    t = dict.fromkeys((k for k, _, _ in XBD_KEYS), 0)
    for d in doc.get("devices", []):
        st = d.get("stats") or {}
        for k, a, b in XBD_KEYS:
            v = st.get(a, 0)
            t[k] += (v.get(b, 0) if isinstance(v, dict) else v) or 0
    return t


def traced(logs, be, run, job, domid, xts):
    """Transitions per I/O from the traced round's xentrace file, or {}."""
    if not logs:
        return {}
    base = os.path.join(logs, "xtc-%s-%s-%s" % (be, run, job))
    try:
        with open(base + ".bin", "rb") as f:
            data = f.read()
        ios = int(open(base + ".ios").read().split()[0])
    except (OSError, ValueError, IndexError):
        return {}
    if ios <= 0:
        return {}
    gnt = {}
    counts, _sub, other, _pairs = xts.summarise(data, 0, gnt)
    out = {"hc": sum(counts.values()) / ios, "mmuext": other["mmuext_ops"] / ios}
    for k in ("map", "unmap", "copy"):
        out["gnt_" + k] = gnt.get(k, (0, 0))[1] / ios
    if domid is not None:
        gcounts, _s, _o, _p = xts.summarise(data, domid)
        out["g_evtchn"] = gcounts.get(32, 0) / ios
    return out


def syscall_cost(serial, cuts, d0):
    """Instructions (all, Xen's, the kernel's, user space's, spinning) of one getppid on dom0's CPUs, or None."""
    with open(serial, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace").replace("\r", "").strip()
            if line.startswith("XBDT-SYSCOUNT "):
                x = fields(line)
                m, n = int(x.get("mark", 0)), int(x.get("calls", 0))
                if m in cuts and m + 1 in cuts and n:
                    (_, a), (_, b) = cuts[m][-1], cuts[m + 1][-1]
                    return [sum(b.get(i, (0,) * 7)[k] - a.get(i, (0,) * 7)[k] for i in d0) / n
                            for k in (0, 3, 4, 5, 6)]
    return None


def build(serial, counts_path, logs):
    """The table's cells: {(backend, run, job): cell}, and the errors."""
    rows, layout = [], {}
    with open(serial, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace").replace("\r", "").strip()
            if line.startswith("XBDT-COUNTING "):
                layout = fields(line)
            elif line.startswith("XBDT-RESULT ") and " run=c-" in line:
                rows.append(fields(line))
    errors = []
    if not rows:
        return {}, errors, layout
    names = SYSCALLS_ARM64 if layout.get("arch") == "aarch64" else SYSCALLS
    d0 = cpus(layout.get("dom0_cpus", "0-1"))
    gc = cpus(layout.get("guest_cpus", "2"))
    cuts = read_counts(counts_path)
    layout["syscall"] = syscall_cost(serial, cuts, d0)
    harness = sorted(ns for m in (MARK_READY, MARK_RESULT) for ns, _ in cuts.get(m, []))
    domids = {}
    if logs and os.path.exists(os.path.join(logs, "count-guests.txt")):
        for line in open(os.path.join(logs, "count-guests.txt")):
            w = line.split()
            if len(w) == 3 and w[2].isdigit():
                domids[(w[0], w[1])] = int(w[2])
    xts = sibling("xentrace-sum") if logs else None
    cells = {}
    for r in rows:
        be, run, job, rnd = r.get("backend"), r.get("run"), r.get("job"), r.get("round", "-")
        ios = num(r.get("ios")) or 0
        key = (be, run, job)
        c = cells.setdefault(key, {"rounds": [], "traced": {}})
        if rnd == "t":
            c["traced"] = traced(logs, be, run, job, domids.get((be, run)), xts) if xts else {}
            c["traced"]["sys"] = num(r.get("sys")) / ios if num(r.get("sys")) is not None and ios else None
            if r.get("scid") and ios:
                by = {}
                for kv in r["scid"].split("+"):
                    k, _, v = kv.partition(":")
                    name = names.get(int(k), "nr%s" % k) if k.isdigit() else k
                    by[name] = by.get(name, 0) + (num(v) or 0) / ios
                c["traced"]["sys_by"] = by
            continue
        m0, m1 = r.get("m0"), r.get("m1")
        if m0 in (None, "-") or int(m0) not in cuts or int(m1) not in cuts:
            errors.append("%s %s %s round %s: no cut for its marks %s/%s (not counted)" % (be, run, job, rnd, m0, m1))
            continue
        (ns0, a), (ns1, b) = cuts[int(m0)][-1], cuts[int(m1)][-1]
        def delta(cpus_, k):
            return sum(b.get(i, (0,) * 7)[k] - a.get(i, (0,) * 7)[k] for i in cpus_)
        def spun(k):  # spinning in Xen's, the kernel's or user space's code (3 to 5), or None
            vals = [(b.get(i) or (None,) * 10)[k + 4] for i in d0] + [(a.get(i) or (None,) * 10)[k + 4] for i in d0]
            return None if None in vals else delta(d0, k + 4)
        dsum, gsum, poll, halts = delta(d0, 0), delta(gc, 0), delta(d0, 1), delta(d0, 2)
        dxen, dkern, duser, dspin = delta(d0, 3), delta(d0, 4), delta(d0, 5), delta(d0, 6)
        # where the plugin splits spinning by where it lies, xen/kern/user leave it out (net-k's parts)
        if None not in (spun(3), spun(4), spun(5)):
            layout["net_split"] = True
            dxen, dkern, duser = dxen - spun(3), dkern - spun(4), duser - spun(5)
        secs = (ns1 - ns0) / 1e9
        leak = any(ns0 < ns < ns1 for ns in harness)
        if ios >= 1000 and (dsum <= 0 or gsum <= 0):
            errors.append("%s %s %s round %s: %d I/Os and %d instructions on dom0's CPUs, %d on the guest's"
                          % (be, run, job, rnd, ios, dsum, gsum))
        per = ios if job != "idle" else secs
        if not per:
            continue
        xa = xbd_totals(os.path.join(logs, "xj-%s.json" % m0)) if logs else None
        xb = xbd_totals(os.path.join(logs, "xj-%s.json" % m1)) if logs else None
        xbd = {("x_" + k): (xb[k] - xa[k]) / per for k in xb} if xa and xb else {}
        # a counter read after the guest's disk went (a last job's) is lost, not negative
        for k in ("bntf", "girq", "ctxt", "pgf", "forks"):
            if (num(r.get(k)) or 0) < 0:
                r[k] = None
        c["rounds"].append({**xbd, 
            "d0_k": dsum / per / 1000, "g_k": gsum / per / 1000,
            "xen_k": dxen / per / 1000 if dxen + dkern + duser else None,
            "kern_k": dkern / per / 1000 if dxen + dkern + duser else None,
            "user_k": duser / per / 1000 if dxen + dkern + duser else None,
            "poll_pct": 100.0 * poll / dsum if dsum else 0.0,
            "spin_pct": 100.0 * dspin / dsum if dsum else 0.0,
            "net_k": (dsum - dspin) / per / 1000,
            **{k: (num(r.get(k)) / per if num(r.get(k)) is not None else None)
               for k in ("bntf", "girq", "ctxt", "pgf", "forks")},
            "halts": halts / per, "iops": num(r.get("iops")) or 0, "p50": num(r.get("p50")),
            "d0": dsum, "ios": ios,
            "dus": num(r.get("dus")) or 0, "leak": leak, "secs": secs,
        })
    return cells, errors, layout


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summary(cells):
    """One dict a (backend, run, job): medians, the rounds' spread, transitions."""
    out = {}
    for key, c in cells.items():
        rs = c["rounds"]
        s = {"n": len(rs), "leak": any(r["leak"] for r in rs)}
        # what dom0 did on its own in the job's time, at the idle job's rate (same guest)
        idle = cells.get((key[0], key[1], "idle"))
        rate = med([r["d0_k"] * 1000 for r in idle["rounds"]]) if idle and idle["rounds"] else None
        if rate is not None and key[2] != "idle":
            s["bg_pct"] = med([100.0 * rate * r["secs"] / r["d0"] if r["d0"] else None for r in rs])
        for k in ("d0_k", "g_k", "xen_k", "kern_k", "user_k", "poll_pct", "spin_pct", "net_k", "bntf", "girq", "ctxt", "pgf", "forks",
                  "halts", "iops", "p50", "dus"):
            s[k] = med([r[k] for r in rs])
        d = [r["d0_k"] for r in rs]
        s["spread"] = 100.0 * (max(d) - min(d)) / min(d) if d and min(d) > 0 else None
        for k in sorted({k for r in rs for k in r if k.startswith("x_")}):
            s[k] = med([r.get(k) for r in rs])
        for k, v in c["traced"].items():
            s[k] = v
        out["%s %s %s" % key] = s
    return out


def f(v, fmt="%.1f"):
    return "-" if v is None else fmt % v


def order(k):
    be, run, job = k.split()
    return (RUNS.index(run) if run in RUNS else 99, JOBS.index(job) if job in JOBS else 99,
            BACKENDS.get(be, 9))


def print_table(s, layout):
    print("counted cost per I/O (make check-xen's count step; dom0 on CPUs %s, the guest on %s):"
          % (layout.get("dom0_cpus", "?"), layout.get("guest_cpus", "?")))
    print("  instructions (thousands a I/O; the idle job: a second): dom0 = its CPUs, Xen's work there included,")
    print("  and of it xen/kern/user = in Xen's code, dom0's kernel's, its processes' (the backend's own for")
    print("  xbd-back and qdisk, next to nothing for kernel blkback)%s;"
          % (", spin-waits left out: they add up to net-k" if layout.get("net_split") else ""))
    print("  poll% = the share of dom0's xbd-back spent polling, spin% = in spin-waits (loops with a pause, on")
    print("  arm64 a yield or wfe: spinlocks, rendezvous, udelay, polling), which run longer the less of the")
    print("  host the emulator gets;")
    print("  net-k = dom0-k without them; bg% = what dom0 ran in the idle job's time, at that job's rate, as a")
    print("  share of dom0-k (time-proportional work: ticks, Xen's housekeeping; it grows as the host slows);")
    print("  spread = the counted rounds' (max-min)/min of dom0-k; 'vs bb' =")
    print("  net-k against kernel blkback's same run and job.  Transitions a I/O: hc = dom0's")
    print("  hypercalls, map/unmap/copy = grant operations, mmuext = mmuext operations (TLB flushes, pins),")
    print("  g-ev = the guest's event_channel_op calls, sys = xbd-back's system calls (these from the traced")
    print("  round); ntf-in = the backend's event-channel interrupts, g-irq = the guest's blkif interrupts,")
    print("  cs = dom0's context switches, pf = its page faults, fork = processes it started, halt = its")
    print("  CPUs' halts.  Wall time, which")
    print("  follows the host's load (labelled): IOPS, fio's p50 (us), dom0's CPU time a I/O (us).")
    hdr = ("  %-7s %-8s %-8s %2s %8s %6s %6s %6s %5s %5s %8s %4s %6s %5s %6s | %6s %5s %5s %5s %6s %5s %5s %6s %6s %5s %6s %5s %5s | %6s %6s %6s"
           % ("backend", "run", "job", "n", "dom0-k", "xen", "kern", "user", "poll%", "spin%", "net-k", "bg%", "spread",
              "vs bb", "gst-k",
              "hc", "map", "unmap", "copy", "mmuext", "g-ev", "sys", "ntf-in", "g-irq", "cs", "pf", "fork", "halt",
              "w:IOPS", "w:p50", "w:us"))
    print(hdr.rstrip())
    for k in sorted(s, key=order):
        be, run, job = k.split()
        c = s[k]
        bb = s.get("blkback %s %s" % (run if run in ("c-pers1", "c-pers0") else "c-pers1", job))
        vs = "-"
        if be != "blkback" and bb and bb.get("net_k") and c.get("net_k") is not None and job != "idle":
            vs = "%.2f" % (c["net_k"] / bb["net_k"])
        line = ("  %-7s %-8s %-8s %2d %8s %6s %6s %6s %5s %5s %8s %4s %6s %5s %6s | %6s %5s %5s %5s %6s %5s %5s %6s %6s %5s %6s %5s %5s | %6s %6s %6s"
                % (be, run, job, c["n"], f(c.get("d0_k")), f(c.get("xen_k")), f(c.get("kern_k")),
                   f(c.get("user_k")), f(c.get("poll_pct"), "%.0f"), f(c.get("spin_pct"), "%.0f"), f(c.get("net_k")),
                   f(c.get("bg_pct"), "%.0f"),
                   f(c.get("spread"), "%.1f%%"), vs, f(c.get("g_k")),
                   f(c.get("hc"), "%.2f"), f(c.get("gnt_map"), "%.2f"), f(c.get("gnt_unmap"), "%.2f"),
                   f(c.get("gnt_copy"), "%.2f"), f(c.get("mmuext"), "%.2f"), f(c.get("g_evtchn"), "%.2f"),
                   f(c.get("sys"), "%.2f"), f(c.get("bntf"), "%.2f"), f(c.get("girq"), "%.2f"),
                   f(c.get("ctxt"), "%.2f"), f(c.get("pgf"), "%.2f"), f(c.get("forks"), "%.2f"),
                   f(c.get("halts"), "%.2f"),
                   f(c.get("iops"), "%.0f"), f(c.get("p50"), "%.0f"), f(c.get("dus"), "%.0f")))
        print(line.rstrip() + ("  (harness work in the window)" if c.get("leak") else ""))


def print_syscall(layout):
    sc = layout.get("syscall")
    if sc:
        print("one system call in dom0 (getppid, xbd-mark's loop): %.0f instructions on dom0's CPUs"
              " (Xen %.0f, kernel %.0f, user %.0f); %.0f of them spinning (on either CPU: the other"
              " one's too)" % tuple(sc))


def print_xbd(s):
    rows = [k for k in sorted(s, key=order) if any(x.startswith("x_") for x in s[k])]
    if rows:
        print_counters(s, rows)
    calls = [k for k in sorted(s, key=order) if s[k].get("sys_by")]
    if calls:
        print("xbd-back's system calls a I/O by name (the traced round, every thread of it and its workers):")
        for k in calls:
            by = s[k]["sys_by"]
            print("  %-26s %s" % (k, " ".join("%s=%.2f" % (n, v) for n, v in
                                           sorted(by.items(), key=lambda kv: -kv[1]) if v >= 0.005)))


def print_counters(s, rows):
    print("xbd-back's own counters a I/O (xbdctl stats, medians over the counted rounds): io_submit calls,")
    print("reap calls, grant map, copy and unmap calls, notifications sent and received, polling (us), clock reads:")
    print("  %-7s %-8s %-8s %6s %6s %6s %6s %6s %6s %6s %7s %6s" %
          ("backend", "run", "job", "sub", "reap", "map", "copy", "unmap", "ntf-o", "ntf-i", "poll-us", "clock"))
    for k in rows:
        be, run, job = k.split()
        c = s[k]
        print("  %-7s %-8s %-8s %6s %6s %6s %6s %6s %6s %6s %7s %6s" %
              (be, run, job, f(c.get("x_sub"), "%.2f"), f(c.get("x_reap"), "%.2f"), f(c.get("x_gmap"), "%.2f"),
               f(c.get("x_gcopy"), "%.2f"), f(c.get("x_gunmap"), "%.2f"), f(c.get("x_ntfo"), "%.2f"),
               f(c.get("x_ntfi"), "%.2f"),
               f(c.get("x_pollns") / 1000 if c.get("x_pollns") is not None else None, "%.2f"),
               f(c.get("x_clk"), "%.2f")))


def check_bounds(s, bound):
    bad = []
    for kv in bound.split():
        job, _, n = kv.partition("=")
        c = s.get("xbd c-pers1 %s" % job)
        lim = num(n)
        if c is None or lim is None:
            bad.append("bound %s: no xbd c-pers1 %s row to hold to it" % (kv, job))
        elif c.get("net_k") is not None and c["net_k"] * 1000 > lim:
            bad.append("xbd-back's %s: %.0f dom0 instructions a I/O (spin-waits left out), past the bound %s"
                       % (job, c["net_k"] * 1000, n))
    return bad


def compare(paths):
    boots = [json.load(open(p)) for p in paths]
    keys = sorted(set().union(*boots), key=order)
    print("the counted cells of %d boots (%s), and their spread ((max-min)/min; * past 5%%):"
          % (len(boots), ", ".join(os.path.basename(os.path.dirname(os.path.abspath(p))) or p for p in paths)))
    over = 0
    for k in keys:
        for cell in COUNTED:
            vals = [b.get(k, {}).get(cell) for b in boots]
            if any(v is None for v in vals):
                continue
            lo, hi = min(vals), max(vals)
            if hi == 0:
                continue
            sp = 100.0 * (hi - lo) / lo if lo > 0 else float("inf")
            # counts that small (a tenth of one a I/O, 1% polling) differ by one event
            small = hi < (0.1 if cell not in ("d0_k", "g_k", "poll_pct") else 1.0)
            mark = "*" if sp > 5 and not small else " "
            over += mark == "*"
            print("  %-32s %-8s %s  %6.1f%%%s" % (k, cell, " ".join("%9.3f" % v for v in vals), sp, mark))
    print("cells past 5%%: %d" % over)
    return 1 if over else 0


def main(argv):
    if argv[:1] == ["--compare"]:
        return compare(argv[1:])
    bound, jpath, pos = "", None, []
    i = 0
    while i < len(argv):
        if argv[i] == "--bound":
            bound = argv[i + 1]
            i += 2
        elif argv[i] == "--json":
            jpath = argv[i + 1]
            i += 2
        else:
            pos.append(argv[i])
            i += 1
    if len(pos) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    cells, errors, layout = build(pos[0], pos[1], pos[2] if len(pos) == 3 else None)
    if not cells:
        return 0
    s = summary(cells)
    print_table(s, layout)
    print_syscall(layout)
    print_xbd(s)
    if jpath:
        with open(jpath, "w") as out:
            json.dump(s, out, indent=1, sort_keys=True)
    errors += check_bounds(s, bound) if bound else []
    for e in errors:
        print("  ERROR: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
