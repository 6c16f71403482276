#!/usr/bin/env python3
"""ilv-table.py: the side-by-side runs' table (make check-xen's ilv step).

Reads a serial log's XBDT-RESULT lines of run=ilv: one guest with a disk on
each backend ran every timed job on each disk in turn, round after round
(A B C A B C ...).  Prints per backend and job the medians over the rounds
(IOPS, dom0's CPU per I/O by its own /proc/stat and as Xen accounts it, and
fio's QD1 p50), and each backend's ratio to kernel blkback: the median of
the per-round ratios, with their range, since two jobs of one round ran
minutes apart at most while the rounds may be far apart.
Usage: ilv-table.py SERIAL-LOG   (exit 1 if a cost that must be there is 0)
"""
import statistics
import sys


def fields(line):
    out = {}
    for kv in line.split()[1:]:
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def main(path):
    rows = []
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace").replace("\r", "").strip()
            if line.startswith("XBDT-RESULT ") and " run=ilv " in line:
                rows.append(fields(line))
    if not rows:
        return 0
    # (backend, job) -> round -> figures
    by = {}
    verify = {}
    for r in rows:
        if r.get("job") == "verify":
            verify[r.get("backend")] = r.get("verify")
            continue
        by.setdefault((r["backend"], r["job"]), {})[r.get("round", "-")] = r
    backends = sorted({b for b, _ in by}, key=lambda b: {"blkback": 0, "xbd": 1, "qdisk": 2}.get(b, 3))
    jobs = [j for j in ("rand4k", "seq128k", "qd1") if any((b, j) in by for b in backends)]
    print("backends side by side (run ilv: one guest, a disk on each backend, each job on each disk in turn;")
    print("medians over the rounds; 'vs bb' = the median of each round's ratio to kernel blkback's same job,")
    print("[lowest..highest] over the rounds; dom0 = dom0's /proc/stat, xen = its vCPUs' time by Xen, p50 = fio's QD1):")
    print("  verify: " + ", ".join("%s %s" % (b, verify.get(b, "-")) for b in backends))
    print(("  %-8s %-8s %3s %7s %10s %9s %7s  %-18s %-18s %-18s" %
           ("backend", "job", "n", "IOPS", "dom0-us/IO", "xen-us/IO", "p50-us", "dom0 vs bb", "xen vs bb", "p50 vs bb")).rstrip())
    bad = 0
    for j in jobs:
        for b in backends:
            rounds = by.get((b, j), {})
            if not rounds:
                continue

            def med(key):
                vals = [num(r.get(key)) for r in rounds.values()]
                vals = [v for v in vals if v is not None]
                return statistics.median(vals) if vals else None

            def ratio(key):
                if b == "blkback":
                    return "-"
                base = by.get(("blkback", j), {})
                rs = []
                for rn, r in rounds.items():
                    a, c = num(r.get(key)), num(base.get(rn, {}).get(key))
                    if a is not None and c:
                        rs.append(a / c)
                if not rs:
                    return "-"
                return "%.2f [%.2f..%.2f]" % (statistics.median(rs), min(rs), max(rs))

            for r in rounds.values():
                # a job that did its I/O and cost dom0 nothing was not counted
                if (num(r.get("ios")) or 0) >= 1000 and (num(r.get("dus")) or 0) == 0:
                    bad += 1
                    print("  ERROR: %s %s round %s: dom0-us/IO 0 over %s I/Os" % (b, j, r.get("round"), r.get("ios")))
            p50 = med("p50") if j == "qd1" else None
            print(("  %-8s %-8s %3d %7.0f %10.0f %9.0f %7s  %-18s %-18s %-18s" %
                   (b, j, len(rounds), med("iops") or 0, med("dus") or 0, med("xus") or 0,
                   "%.0f" % p50 if p50 is not None else "-",
                    ratio("dus"), ratio("xus"), ratio("p50") if j == "qd1" else "-")).rstrip())
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: ilv-table.py SERIAL-LOG", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
