#!/usr/bin/env python3
"""xentrace-sum.py: what dom0 asked of Xen per guest I/O, from a xentrace file.

Usage: xentrace-sum.py TRACE IOS [DOMID]

TRACE is what `xentrace -e 0x0022f000` (the scheduler and PV classes)
wrote during one fio job, IOS the job's guest I/Os.  Prints one line:
dom0's hypercalls per I/O (all, and the busiest by name), its PV traps,
page faults and emulated privileged instructions, how often one of its
vCPUs was switched in and how often one blocked (went idle).

The file is a sequence of per-CPU chunks, each opened by a CPU-change
record (the CPU and the chunk's length); a record is a 32-bit header
(event: 28 bits, extra words: 3, a TSC included: 1), the TSC's two words
if included, then the extra words (xen/include/public/trace.h).  Which
domain a record belongs to follows from the scheduler's switch records
on its CPU (TRC_SCHED_SWITCH: previous domain and unit, next domain and
unit); records before a CPU's first switch are not counted.

A second line says where dom0's time went between its records: the TSC
cycles per I/O from one record to the next on a CPU while dom0 ran
there, summed by the pair of records around them ("iret>iret": from a
return to the guest to the next one: what ran in dom0 in between, its
system call entries included, which Xen does not trace), the costliest
pairs with their share.  Records without a TSC are skipped.
"""
import struct
import sys

TRC_SCHED = 0x0002f000
TRC_TRACE_CPU_CHANGE = 0x0001f003
TRC_LOST_RECORDS = 0x0001f001
TRC_SCHED_SWITCH = 0x0002800a
TRC_SCHED_BLOCK = 0x00028006
TRC_PV_HYPERCALL = 0x00201001
TRC_PV_TRAP = 0x00201003
TRC_PV_PAGE_FAULT = 0x00201004
TRC_PV_EMULATE_PRIVOP = 0x00201006
TRC_PV_MATH_STATE_RESTORE = 0x00201008
TRC_PV_HYPERCALL_V2 = 0x0020100d
TRC_PV_HYPERCALL_SUBCALL = 0x0020200e
TRC_64_FLAG = 0x100
# a V2 hypercall record's first word: the op, and above it which arguments
# follow (two bits each from bit 20): grant_table_op records its cmd and
# count, mmuext_op and multicall their count (xen/common/trace.c)
TRC_PV_HYPERCALL_V2_ARG_MASK = 0xfff00000
HC_GRANT_TABLE_OP = 20
HC_MMUEXT_OP = 26
GNTTABOP = {0: "map", 1: "unmap", 5: "copy"}

HYPERCALLS = {
    0: "set_trap_table", 1: "mmu_update", 2: "set_gdt", 3: "stack_switch",
    4: "set_callbacks", 5: "fpu_taskswitch", 6: "sched_op_compat",
    7: "platform_op", 10: "update_descriptor", 12: "memory_op",
    13: "multicall", 14: "update_va_mapping", 15: "set_timer_op",
    17: "xen_version", 18: "console_io", 20: "grant_table_op",
    21: "vm_assist", 23: "iret", 24: "vcpu_op", 25: "set_segment_base",
    26: "mmuext_op", 29: "sched_op", 30: "callback_op",
    32: "event_channel_op", 33: "physdev_op", 34: "hvm_op",
    35: "sysctl", 36: "domctl", 41: "dm_op",
}


def name(op):
    return HYPERCALLS.get(op, "hypercall%d" % op)


def label(event, words):
    """A record's short name for the time pairs."""
    base = event & ~TRC_64_FLAG
    if base == TRC_PV_HYPERCALL_V2 and words:
        return name(words[0] & 0x000fffff)
    if base == TRC_PV_HYPERCALL_SUBCALL and words:
        return "multicall." + name(words[0] & 0x000fffff)
    if base == TRC_PV_TRAP:
        return "trap"
    if base == TRC_PV_PAGE_FAULT:
        return "fault"
    if base == TRC_PV_EMULATE_PRIVOP:
        return "privop"
    if base == TRC_PV_MATH_STATE_RESTORE:
        return "fpu"
    if event == TRC_SCHED_SWITCH:
        return "switch"
    if (event & 0xffff0000) == (TRC_SCHED & 0xffff0000):
        return "sched"
    return "other"


def grant_ops(op, words, gnt, other):
    """A grant_table_op's cmd and count, an mmuext_op's count (V2 records)."""
    # a preempted call comes again as its continuation, with its progress
    # above the cmd's low 12 bits (grant_table_op) or the count's top bit
    # (mmuext_op): only the first call's operations are counted
    if op == HC_GRANT_TABLE_OP and len(words) >= 3:
        if words[1] >> 12:
            return
        name = GNTTABOP.get(words[1], "cmd%d" % words[1])
        calls, ops = gnt.get(name, (0, 0))
        gnt[name] = (calls + 1, ops + words[2])
    elif op == HC_MMUEXT_OP and len(words) >= 2 and not words[1] >> 31:
        other["mmuext_ops"] += words[1]


def summarise(data, domid, gnt=None):
    """Counts of domid's records; gnt, when given, gets its grant
    operations by name (map, unmap, copy: calls and operations), in and
    out of multicalls."""
    if gnt is None:
        gnt = {}
    counts = {}
    sub = {}
    other = {"traps": 0, "faults": 0, "privops": 0, "fpu": 0,
             "switched_in": 0, "blocks": 0, "lost": 0, "mmuext_ops": 0}
    pairs = {}     # (label, label) -> TSC cycles while domid ran
    last = {}      # CPU -> (label, TSC) of its latest record
    cur = {}       # CPU -> the domain running there (None: not yet known)
    cpu = None
    end = 0        # where the current CPU's chunk ends
    pos = 0
    n = len(data)
    while pos + 4 <= n:
        hdr, = struct.unpack_from("<I", data, pos)
        event = hdr & 0x0fffffff
        extra = (hdr >> 28) & 7
        tsc = hdr >> 31
        size = 4 + (8 if tsc else 0) + 4 * extra
        if pos + size > n:
            break
        words = struct.unpack_from("<%dI" % extra, data, pos + 4 + (8 if tsc else 0))
        stamp = struct.unpack_from("<Q", data, pos + 4)[0] if tsc else None
        pos += size
        if event == TRC_TRACE_CPU_CHANGE and extra >= 2:
            cpu, length = words[0], words[1]
            end = pos + length
            cur.setdefault(cpu, None)
            continue
        if cpu is None or pos > end:
            continue
        if event == TRC_LOST_RECORDS:
            other["lost"] += 1
            last.pop(cpu, None)
            continue
        if stamp is not None:
            here = label(event, words)
            if cur.get(cpu) == domid and cpu in last:
                prev, at = last[cpu]
                if 0 <= stamp - at < 1 << 40:
                    key = (prev, here)
                    pairs[key] = pairs.get(key, 0) + stamp - at
            last[cpu] = (here, stamp)
        if event == TRC_SCHED_SWITCH and extra >= 4:
            cur[cpu] = words[2]
            if words[2] == domid:
                other["switched_in"] += 1
            continue
        if event == TRC_SCHED_BLOCK and extra >= 1:
            if words[0] == domid:
                other["blocks"] += 1
            continue
        if cur.get(cpu) != domid:
            continue
        base = event & ~TRC_64_FLAG
        if base == TRC_PV_HYPERCALL_V2 and extra >= 1:
            op = words[0] & 0x000fffff
            counts[op] = counts.get(op, 0) + 1
            grant_ops(op, words, gnt, other)
        elif base == TRC_PV_HYPERCALL_SUBCALL and extra >= 1:
            op = words[0] & 0x000fffff
            sub[op] = sub.get(op, 0) + 1
            grant_ops(op, words, gnt, other)
        elif base == TRC_PV_HYPERCALL and extra >= 1:
            op = words[-1] & 0xff
            counts[op] = counts.get(op, 0) + 1
        elif base == TRC_PV_TRAP:
            other["traps"] += 1
        elif base == TRC_PV_PAGE_FAULT:
            other["faults"] += 1
        elif base == TRC_PV_EMULATE_PRIVOP:
            other["privops"] += 1
        elif base == TRC_PV_MATH_STATE_RESTORE:
            other["fpu"] += 1
    return counts, sub, other, pairs


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("usage: xentrace-sum.py TRACE IOS [DOMID]\n")
        return 2
    path, ios = sys.argv[1], int(sys.argv[2])
    domid = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if ios <= 0:
        sys.stderr.write("xentrace-sum.py: no guest I/O to count against\n")
        return 2
    with open(path, "rb") as f:
        data = f.read()
    counts, sub, other, pairs = summarise(data, domid)
    total = sum(counts.values())
    busiest = sorted(counts.items(), key=lambda kv: -kv[1])[:9]
    line = "hypercalls=%.2f" % (total / ios)
    line += "".join(" %s=%.2f" % (name(op), c / ios) for op, c in busiest)
    if sub:
        top = sorted(sub.items(), key=lambda kv: -kv[1])[:4]
        line += " | in multicalls:" + "".join(" %s=%.2f" % (name(op), c / ios) for op, c in top)
    line += " | traps=%.2f faults=%.2f privops=%.2f fpu=%.2f switched-in=%.2f blocks=%.2f" % (
        other["traps"] / ios, other["faults"] / ios, other["privops"] / ios,
        other["fpu"] / ios, other["switched_in"] / ios, other["blocks"] / ios)
    if other["lost"]:
        line += " (%d lost-record marks: undercounted)" % other["lost"]
    print(line)
    spent = sum(pairs.values())
    if spent:
        top = sorted(pairs.items(), key=lambda kv: -kv[1])[:6]
        print("time: %.2f Mcycles/IO;" % (spent / ios / 1e6) +
              "".join(" %s>%s %.0f%%" % (a, b, 100.0 * c / spent) for (a, b), c in top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
