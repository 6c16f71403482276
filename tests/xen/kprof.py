#!/usr/bin/env python3
"""kprof.py: where dom0's kernel and Xen spend their instructions per I/O,
by function, per backend and job (make check-xen-cost with COUNT_PROF=1).

Usage:
  kprof.py SERIAL-LOG PROF KALLSYMS [--top N] [--counts COUNTS]

SERIAL-LOG holds the count step's XBDT-COUNTING line (dom0_cpus=) and its
XBDT-RESULT lines (backend=, run=, job=, round=, ios=, and the two cut
marks around the job, m0= and m1=); PROF is what the plugin's prof=
wrote (tests/xen/count/xbd-count.c: at each cut, "cut MARK", then the
instructions each block of Xen's (x) or a kernel's (k) code ran on each
of the first four CPUs since the cut before); KALLSYMS is dom0's
/proc/kallsyms as the count step saved it (text symbols, modules' with
their [module]).  A job's profile is the blocks' counts between its two
cuts on dom0's CPUs, summed over its counted rounds (not the traced one)
and divided by their I/Os.  Blocks holding a spin-wait hint (pause, yield,
wfe) are counted apart: how many run follows the host's load.  Xen's code
has no symbols here (Debian ships none), so it is one line.

Prints, per run and job, each backend's kernel and Xen instructions per
I/O (with --counts, the plugin's out= file, which times the cuts: also
less what the backend's idle job ran a second in its kernel and Xen, over
the job's time, the time-driven work of ticks, timers and the scheduler's
housekeeping that grows per I/O as the emulator slows), then the functions with the most instructions per I/O side by side
(the biggest first, with xbd-back's minus kernel blkback's), then the same
by module.  Exits 1 when an input holds nothing to profile.
"""
import bisect
import importlib.util
import os
import sys


def _cost_table():
    """cost-table.py beside this one, as a module (its name has a dash): its readers of the
    serial log's fields, the CPU lists and the plugin's counts."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("cost_table", os.path.join(here, "cost-table.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CT = _cost_table()


def read_serial(path):
    """dom0's CPUs; the counted rounds {(backend, run, job, round): (ios, m0, m1)};
    the idle jobs {(backend, run): (m0, m1)}."""
    dom0, jobs, idle = None, {}, {}
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace")
            i = line.find("XBDT-COUNTING ")
            if i >= 0:
                d = CT.fields(line[i:])
                if "dom0_cpus" in d:
                    dom0 = CT.cpus(d["dom0_cpus"])
                continue
            i = line.find("XBDT-RESULT ")
            if i < 0:
                continue
            d = CT.fields(line[i:])
            if d.get("job") == "idle" and d.get("m0") and d.get("m1"):
                try:
                    idle[(d.get("backend"), d.get("run"))] = (int(d["m0"]), int(d["m1"]))
                except ValueError:
                    pass
                continue
            if not d.get("m0") or not d.get("m1") or d.get("round") in (None, "t", "-"):
                continue
            try:
                ios, m0, m1 = int(d["ios"]), int(d["m0"]), int(d["m1"])
            except (KeyError, ValueError):
                continue
            if ios <= 0:
                continue
            jobs[(d.get("backend"), d.get("run"), d.get("job"), d["round"])] = (ios, m0, m1)
    return dom0, jobs, idle


def read_cut_times(path):
    """mark -> the host's ns at its first cut (the plugin's out= file)."""
    return {mark: cuts[0][0] for mark, cuts in CT.read_counts(path).items()}


def read_prof(path):
    """[(mark, {vaddr: [where, spin, c0, c1, c2, c3]})] in the order of the cuts."""
    cuts = []
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "cut":
                cuts.append((int(w[1]), {}))
                continue
            if not cuts or len(w) != 8:
                continue
            rec = cuts[-1][1].setdefault(int(w[0], 16), [w[1], int(w[3]), 0, 0, 0, 0])
            for c in range(4):
                rec[2 + c] += int(w[4 + c])
    return cuts


def read_kallsyms(path):
    addrs, names = [], []
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) < 3 or w[1] not in "tTwW":
                continue
            try:
                a = int(w[0], 16)
            except ValueError:
                continue
            if a == 0:
                continue
            addrs.append(a)
            names.append(w[2] + (" " + w[3] if len(w) > 3 else ""))
    order = sorted(range(len(addrs)), key=lambda i: addrs[i])
    return [addrs[i] for i in order], [names[i] for i in order]


def main(argv):
    top = 25
    counts = None
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--top" and i + 1 < len(argv):
            top = int(argv[i + 1])
            i += 2
            continue
        if argv[i] == "--counts" and i + 1 < len(argv):
            counts = argv[i + 1]
            i += 2
            continue
        args.append(argv[i])
        i += 1
    if len(args) != 3:
        sys.stderr.write(__doc__)
        return 2
    dom0, jobs, idle = read_serial(args[0])
    times = read_cut_times(counts) if counts else {}
    cuts = read_prof(args[1])
    addrs, names = read_kallsyms(args[2])
    if not dom0 or not jobs or not cuts or not addrs:
        print("kprof.py: nothing to profile (dom0's CPUs %s, %d jobs, %d cuts, %d symbols)"
              % (dom0, len(jobs), len(cuts), len(addrs)))
        return 1
    dom0 = [c for c in dom0 if c < 4]
    where = {}
    for n, (mark, _) in enumerate(cuts):
        where.setdefault(mark, n)
    sym_cache = {}

    def symbol(vaddr, w):
        if w == "x":
            return "(Xen)"
        s = sym_cache.get(vaddr)
        if s is None:
            k = bisect.bisect_right(addrs, vaddr) - 1
            s = names[k] if k >= 0 else "(kernel, no symbol)"
            sym_cache[vaddr] = s
        return s

    def window(fn, a, b):
        """Add cuts a+1..b to fn ({function: [insns, spinning]})."""
        for n in range(a + 1, b + 1):
            for vaddr, rec in cuts[n][1].items():
                insns = sum(rec[2 + c] for c in dom0)
                if not insns:
                    continue
                f = fn.setdefault(symbol(vaddr, rec[0]), [0, 0])
                f[0] += insns
                if rec[1]:
                    f[1] += insns

    def kernel_xen(fn):
        """Kernel and Xen instructions in fn, spinning left out."""
        k = sum(v[0] - v[1] for s, v in fn.items() if s != "(Xen)")
        x = fn.get("(Xen)", [0, 0])
        return k, x[0] - x[1]

    # what each backend's idle job ran a second in its kernel and Xen (needs the cuts' times)
    idle_rate = {}
    for key, (m0, m1) in idle.items():
        a, b = where.get(m0), where.get(m1)
        if a is None or b is None or b <= a or m0 not in times or m1 not in times or times[m1] <= times[m0]:
            continue
        fn = {}
        window(fn, a, b)
        secs = (times[m1] - times[m0]) / 1e9
        k, x = kernel_xen(fn)
        idle_rate[key] = (k / secs, x / secs)
    # (backend, run, job) -> {function: [insns, spinning]}, [ios, seconds or None]
    cells = {}
    missing = 0
    for (be, run, job, rnd), (ios, m0, m1) in sorted(jobs.items()):
        a, b = where.get(m0), where.get(m1)
        if a is None or b is None or b <= a:
            missing += 1
            continue
        fn, total = cells.setdefault((be, run, job), ({}, [0, 0.0]))
        total[0] += ios
        if total[1] is not None and m0 in times and m1 in times:
            total[1] += (times[m1] - times[m0]) / 1e9
        else:
            total[1] = None
        window(fn, a, b)
    if missing:
        print("(%d job rounds had no cut in the profile: left out)" % missing)
    print("Where dom0's kernel and Xen spend their instructions per I/O, on dom0's CPUs %s, per function"
          % ",".join(map(str, dom0)))
    print("(k = thousands of instructions per I/O, summed over the counted rounds; spin = of them in blocks")
    print("holding a spin-wait hint, which run longer the less of the host the emulator gets; 'xbd-bb' =")
    print("xbd-back's minus kernel blkback's; functions of modules carry their [module]):")
    groups = {}
    for (be, run, job) in cells:
        groups.setdefault((run, job), []).append(be)
    for (run, job), bes in sorted(groups.items()):
        bes = sorted(bes, key=lambda b: {"xbd": 0, "blkback": 1, "qdisk": 2}.get(b, 9))
        per = {}
        for be in bes:
            fn, total = cells[(be, run, job)]
            per[be] = {k: (v[0] / total[0] / 1000.0, v[1] / total[0] / 1000.0) for k, v in fn.items()}
        print()
        print("%s %s:" % (run, job))
        for be in bes:
            p = per[be]
            kern = sum(v[0] - v[1] for k, v in p.items() if k != "(Xen)")
            kspin = sum(v[1] for k, v in p.items() if k != "(Xen)")
            x = p.get("(Xen)", (0.0, 0.0))
            ios, secs = cells[(be, run, job)][1]
            print("  %-8s kernel %8.2f k (+ %.2f k spinning), Xen %8.2f k (+ %.2f k spinning), %d I/Os"
                  % (be, kern, kspin, x[0] - x[1], x[1], ios))
            rate = idle_rate.get((be, run))
            if rate and secs:
                print("  %-8s less the idle job's %.0f k and %.0f k a second over the job's %.2f s: kernel %8.2f k, Xen %8.2f k"
                      % ("", rate[0] / 1000, rate[1] / 1000, secs, kern - rate[0] * secs / ios / 1000,
                         x[0] - x[1] - rate[1] * secs / ios / 1000))
        both = "xbd" in per and "blkback" in per

        def table(rows, title, width):
            keys = sorted(rows, key=lambda k: -max(rows[k][be][0] - rows[k][be][1] for be in bes))
            print("  %-*s %s%s" % (width, title, " ".join("%9s %6s" % (be[:9], "spin") for be in bes),
                                    "   xbd-bb" if both else ""))
            rest = {be: 0.0 for be in bes}
            for n, k in enumerate(keys):
                if n >= top:
                    for be in bes:
                        rest[be] += rows[k][be][0] - rows[k][be][1]
                    continue
                cols = " ".join("%9.3f %6.3f" % (rows[k][be][0] - rows[k][be][1], rows[k][be][1]) for be in bes)
                d = ""
                if both:
                    d = " %8.3f" % ((rows[k]["xbd"][0] - rows[k]["xbd"][1]) - (rows[k]["blkback"][0] - rows[k]["blkback"][1]))
                print("  %-*s %s%s" % (width, k[:width], cols, d))
            if len(keys) > top:
                cols = " ".join("%9.3f %6s" % (rest[be], "") for be in bes)
                d = " %8.3f" % (rest["xbd"] - rest["blkback"]) if both else ""
                print("  %-*s %s%s" % (width, "(the other %d)" % (len(keys) - top), cols, d))

        funcs = {}
        mods = {}
        for be in bes:
            for k, v in per[be].items():
                funcs.setdefault(k, {b: (0.0, 0.0) for b in bes})[be] = v
                m = k.split(" ", 1)[1] if " [" in k else ("(Xen)" if k == "(Xen)" else "[vmlinux]")
                o = mods.setdefault(m, {b: (0.0, 0.0) for b in bes})
                o[be] = (o[be][0] + v[0], o[be][1] + v[1])
        table(funcs, "function (k a I/O, spinning left out)", 40)
        print()
        table(mods, "module", 40)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
