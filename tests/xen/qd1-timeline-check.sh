#!/bin/sh
# tests/xen/qd1-timeline-check.sh: tests/xen/qd1-timeline.py (the timeline
# step's ftrace files, cut on the host) finds the stages it should.  A
# trace made here in ftrace's text format: three requests of xbd-back at
# QD1 (the ring's interrupt, the worker switched in, its system calls,
# the disk's request, its sleep, the completion, the notify ioctl), then
# two of kernel blkback's (its kthread, its notify from softirq), with
# other tasks' events between; each stage has one length in every request.
. "$top_srcdir/tests/lib/sim.sh"

command -v python3 >/dev/null || skip "no python3 (the script runs on the host of make check-xen)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/xbd-qtl.XXXXXXXX") || fail "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
python3 - "$WORK" <<'PY' || fail "cannot write the traces"
import sys

def line(task, pid, cpu, t_us, rest):
    return "%16s-%-7d [%03d] d..2. %12.6f: %s\n" % (task, pid, cpu, t_us / 1e6, rest)

def sw(prev, prev_pid, nxt, nxt_pid):
    return ("sched_switch: prev_comm=%s prev_pid=%d prev_prio=120 prev_state=S ==> "
            "next_comm=%s next_pid=%d next_prio=120" % (prev, prev_pid, nxt, nxt_pid))

head = "# tracer: function\n#\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
out = [head]
base = 100e6
for k in range(4):
    t = base + k * 10000
    out.append(line("<idle>", 0, 0, t, "irq_handler_entry: irq=50 name=evtchn:xbdr0"))
    if k == 3:
        break
    out.append(line("<idle>", 0, 1, t + 50, "irq_handler_entry: irq=30 name=timer1"))
    out.append(line("<idle>", 0, 0, t + 100, sw("swapper/0", 0, "xbd-worker", 777)))
    for nr, a, b in ((0, 150, 200), (1, 250, 300)):
        out.append(line("xbd-worker", 777, 0, t + a, "sys_enter: NR %d (9, 1, 4, 0, 0, 0)" % nr))
        out.append(line("xbd-worker", 777, 0, t + b, "sys_exit: NR %d = 4" % nr))
    out.append(line("xbd-worker", 777, 0, t + 350, "sys_enter: NR 209 (7, 1, 0, 0, 0, 0)"))
    out.append(line("xbd-worker", 777, 0, t + 400, "block_rq_issue: 254,0 R 4096 () 2063232 + 8 [xbd-worker]"))
    out.append(line("xbd-worker", 777, 0, t + 600, "sys_exit: NR 209 = 1"))
    out.append(line("xbd-worker", 777, 0, t + 650, "sys_enter: NR 232 (5, 1, 3, -1, 0, 0)"))
    out.append(line("xbd-worker", 777, 0, t + 700, sw("xbd-worker", 777, "swapper/0", 0)))
    out.append(line("init", 1, 1, t + 1000, "sys_enter: NR 0 (0, 0, 0, 0, 0, 0)"))
    out.append(line("<idle>", 0, 0, t + 2550, "irq_handler_entry: irq=41 name=virtio0-req.0"))
    out.append(line("<idle>", 0, 0, t + 2600, "block_rq_complete: 254,0 R () 2063232 + 8 [0]"))
    out.append(line("<idle>", 0, 0, t + 2700, sw("swapper/0", 0, "xbd-worker", 777)))
    out.append(line("xbd-worker", 777, 0, t + 2750, "sys_exit: NR 232 = 1"))
    out.append(line("xbd-worker", 777, 0, t + 2800, "sys_enter: NR 16 (9, 4, 0, 0, 0, 0)"))
    out.append(line("xbd-worker", 777, 0, t + 2900, "sys_exit: NR 16 = 0"))
open(sys.argv[1] + "/xbd.txt", "w").write("".join(out))

out = [head]
for k in range(3):
    t = base + k * 5000
    out.append(line("<idle>", 0, 1, t, "irq_handler_entry: irq=50 name=blkif-backend"))
    if k == 2:
        break
    out.append(line("<idle>", 0, 1, t + 300, sw("swapper/1", 0, "5.xvdb-0", 1502)))
    out.append(line("5.xvdb-0", 1502, 1, t + 500, "block_rq_issue: 7,0 R 4096 () 80 + 8 [5.xvdb-0]"))
    out.append(line("5.xvdb-0", 1502, 1, t + 600, sw("5.xvdb-0", 1502, "swapper/1", 0)))
    out.append(line("<idle>", 0, 1, t + 1500, "block_rq_complete: 7,0 R () 80 + 8 [0]"))
    out.append(line("ksoftirqd/1", 20, 1, t + 1540, "xbdt_notify: (notify_remote_via_irq+0x0/0x50)"))
open(sys.argv[1] + "/bb.txt", "w").write("".join(out))
open(sys.argv[1] + "/empty.txt", "w").write(head)
PY
out=$(python3 "$top_srcdir/tests/xen/qd1-timeline.py" "$WORK/xbd.txt" "$WORK/bb.txt") ||
	fail "qd1-timeline.py failed: $out"
echo "$out"
# xbd-back: woken 100 us after the interrupt, the disk's request 400 us in,
# 2200 us on the disk, switched in 100 us after it, the notify ioctl 200
# us after it: 2800 us in dom0, 7200 until the next request
xbd=$(echo "$out" | sed -n '/xbd.txt:/,/bb.txt:/p')
case $xbd in *"3 requests, ring interrupt evtchn:xbdr0, ring thread 777"*) ;;
*) fail "xbd-back's requests, interrupt or thread not found: $xbd" ;; esac
echo "$xbd" | grep -q '^  p50 us *100 *400 *2200 *100 *200 *2800 *7200$' ||
	fail "xbd-back's stages miscut: $xbd"
# the ring thread's calls: init's read is not its; epoll_wait blocked 2100 us
for want in "io_submit 1.00 (each 250 us)" "epoll_wait 1.00 (blocks 2100 us)" "ioctl 1.00 (each 100 us)" \
	"read 1.00 (each 50 us)" "write 1.00 (each 50 us)"; do
	case $xbd in *"$want"*) ;; *) fail "expected '$want' in: $xbd" ;; esac
done
# kernel blkback: its kthread 300 us after, the loop device's request at
# 500, done at 1500, the notify from softirq 40 us later (never switched in again)
bb=$(echo "$out" | sed -n '/bb.txt:/,$p')
case $bb in *"2 requests, ring interrupt blkif-backend, ring thread 1502"*) ;;
*) fail "blkback's requests or kthread not found: $bb" ;; esac
echo "$bb" | grep -q '^  p50 us *300 *500 *1000 *0 *40 *1540 *3460$' || fail "blkback's stages miscut: $bb"
python3 "$top_srcdir/tests/xen/qd1-timeline.py" "$WORK/empty.txt" >/dev/null 2>&1 &&
	fail "a trace without requests was not refused"
exit 0
