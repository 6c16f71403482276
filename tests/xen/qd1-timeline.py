#!/usr/bin/env python3
"""qd1-timeline.py TRACE...: single guest requests (QD1) cut into stages.

Reads the timeline step's ftrace files (tests/xen/lib/measure.sh, ftrace_on:
interrupt handlers' entries, the scheduler's wake-ups and switches, block
requests issued and completed, xbd-back's system calls, a kprobe on kernel
blkback's notify_remote_via_irq) and, for each, prints where dom0 spent a
request's time.

A request's dom0 part starts with the frontend's notification (the entry of
the ring's event-channel interrupt handler: evtchn:xbdr* or evtchn:xbd* for
xbd-back, blkif-backend for kernel blkback) and ends with the backend's
notification of the response (the entry of xbd-back's last ioctl before
the next request, the event channel's notify; blkback's
notify_remote_via_irq).  Stages, medians over the requests (us):

  wake   notification to the ring thread running (0 when it was running)
  issue  notification to the first block request issued (consume, grants, submit)
  disk   first block request issued to the last one completed (the storage)
  done   last completion to the ring thread running again (0 when it was running)
  resp   last completion to the response's notification (reap, respond)
  dom0   notification in to notification out (the sum of the above)
  guest  notification out to the next one in (Xen, the guest, fio)

and per request: the ring thread's system calls by name (with the time
spent in each, blocking ones apart), context switches, interrupts.  Prints
one block per file; exits 1 when a file holds no request it could cut.
"""
import re
import statistics
import sys

LINE = re.compile(r'^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?'
                  r'(?P<ts>\d+\.\d+):\s+(?P<rest>.*)$')
SYSCALLS = {0: 'read', 1: 'write', 7: 'poll', 16: 'ioctl', 202: 'futex', 208: 'io_getevents',
            209: 'io_submit', 228: 'clock_gettime', 230: 'clock_nanosleep', 232: 'epoll_wait',
            281: 'epoll_pwait', 426: 'io_uring_enter', 441: 'epoll_pwait2', 295: 'preadv',
            296: 'pwritev', 17: 'pread64', 18: 'pwrite64', 24: 'sched_yield'}
BLOCKING = {'epoll_wait', 'epoll_pwait', 'epoll_pwait2', 'io_uring_enter', 'io_getevents', 'poll',
            'futex', 'clock_nanosleep'}
SUBMIT = {209, 426}
BLKBACK_THREAD = re.compile(r'^(blkback\.|\d+\.xvd)')


def parse(path):
    """The trace's events in order: (t_us, pid, cpu, kind, detail)."""
    ev = []
    with open(path, errors='replace') as f:
        for line in f:
            if line.startswith('#'):
                continue
            m = LINE.match(line)
            if not m:
                continue
            t = float(m.group('ts')) * 1e6
            pid = int(m.group('pid'))
            cpu = int(m.group('cpu'))
            rest = m.group('rest')
            head, _, detail = rest.partition(' ')
            kind = head.rstrip(':')  # an event (or a kprobe): "name: fields"
            ev.append((t, pid, cpu, kind, detail, m.group('task').strip()))
    return ev


def field(detail, name):
    m = re.search(r'\b' + name + r'=(\S+)', detail)
    return m.group(1) if m else None


def quantile(v, q):
    if not v:
        return float('nan')
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def analyse(path):
    ev = parse(path)
    if not ev:
        return None, 'no events'
    # the ring's interrupt: the busiest of the backends' event-channel names
    irqs = {}
    for t, pid, cpu, kind, d, task in ev:
        if kind == 'irq_handler_entry':
            name = field(d, 'name') or ''
            if name.startswith('evtchn:xbd') or name == 'blkif-backend':
                irqs[name] = irqs.get(name, 0) + 1
    if not irqs:
        return None, 'no ring interrupt (evtchn:xbd*, blkif-backend)'
    ring_irq = max(irqs, key=irqs.get)
    xbd = ring_irq.startswith('evtchn:')
    # the ring thread: xbd-back's that submits, or blkback's kthread
    subs = {}
    for t, pid, cpu, kind, d, task in ev:
        if kind == 'sys_enter':
            m = re.match(r'NR (\d+)', d)
            if m and int(m.group(1)) in SUBMIT:
                subs[pid] = subs.get(pid, 0) + 1
        elif not xbd and kind == 'sched_switch':
            c = field(d, 'next_comm')
            p = field(d, 'next_pid')
            if c and p and BLKBACK_THREAD.match(c):
                subs[int(p)] = subs.get(int(p), 0) + 1
    ring_tid = max(subs, key=subs.get) if subs else None

    def notifies(e):
        if xbd:
            return e[1] == ring_tid and e[3] == 'sys_enter' and e[4].startswith('NR 16 ')
        return e[3] == 'xbdt_notify'

    anchors = [i for i, e in enumerate(ev)
               if e[3] == 'irq_handler_entry' and field(e[4], 'name') == ring_irq]
    st = {k: [] for k in ('wake', 'issue', 'disk', 'done', 'resp', 'dom0', 'guest')}
    calls, ctime, switches, irqcount = {}, {}, [], {}
    nreq = 0
    for a, b in zip(anchors, anchors[1:]):
        t0 = ev[a][0]
        seg = ev[a:b]
        # the notification of the response, the last one before the next request
        nts = [e[0] for e in seg if notifies(e)]
        if not nts:
            continue  # a spurious notification, or one the trace did not cut
        tn = nts[-1]
        t_next = ev[b][0]
        issues = [e[0] for e in seg if e[3] == 'block_rq_issue' and e[0] <= tn]
        comps = [e[0] for e in seg if e[3] == 'block_rq_complete' and e[0] <= tn]
        sw_in = [e[0] for e in seg if e[3] == 'sched_switch' and
                 field(e[4], 'next_pid') == str(ring_tid) and e[0] <= tn]
        nreq += 1
        st['dom0'].append(tn - t0)
        st['guest'].append(t_next - tn)
        # the ring thread was asleep if it is switched in before it does anything
        first = next((e[0] for e in seg if e[1] == ring_tid and e[3] != 'sched_switch'), tn)
        woke = [s for s in sw_in if s <= first]
        st['wake'].append(woke[0] - t0 if woke else 0.0)
        if issues:
            st['issue'].append(issues[0] - t0)
        if issues and comps and comps[-1] >= issues[0]:
            tc = comps[-1]
            st['disk'].append(tc - issues[0])
            st['resp'].append(tn - tc)
            after = [s for s in sw_in if s >= tc]
            st['done'].append(after[0] - tc if after else 0.0)
        switches.append(sum(1 for e in seg if e[3] == 'sched_switch'))
        for e in seg:
            if e[3] == 'irq_handler_entry':
                n = field(e[4], 'name') or '?'
                irqcount[n] = irqcount.get(n, 0) + 1
        # the ring thread's calls and the time inside each (enter to exit)
        open_ = {}
        for e in seg:
            if e[1] != ring_tid or e[3] not in ('sys_enter', 'sys_exit'):
                continue
            m = re.match(r'NR (\d+)', e[4])
            if not m:
                continue
            nr = int(m.group(1))
            name = SYSCALLS.get(nr, 'nr%d' % nr)
            if e[3] == 'sys_enter':
                calls[name] = calls.get(name, 0) + 1
                open_[nr] = e[0]
            elif nr in open_:
                ctime[name] = ctime.get(name, 0.0) + e[0] - open_.pop(nr)
    if not nreq:
        return None, 'no request with a response notification (%s, %d interrupts)' % (ring_irq, len(anchors))
    out = {'irq': ring_irq, 'tid': ring_tid, 'n': nreq, 'st': st, 'calls': calls, 'ctime': ctime,
           'switches': statistics.mean(switches), 'irqs': irqcount}
    return out, None


def report(path, r):
    n = r['n']
    print('%s: %d requests, ring interrupt %s, ring thread %s' % (path, n, r['irq'], r['tid']))
    cols = ('wake', 'issue', 'disk', 'done', 'resp', 'dom0', 'guest')
    print('  stage  ' + ' '.join('%7s' % c for c in cols))
    print('  p50 us ' + ' '.join('%7.0f' % quantile(r['st'][c], 0.5) for c in cols))
    print('  p90 us ' + ' '.join('%7.0f' % quantile(r['st'][c], 0.9) for c in cols))
    print('  n      ' + ' '.join('%7d' % len(r['st'][c]) for c in cols))
    if r['calls']:
        parts = []
        for name in sorted(r['calls'], key=lambda k: -r['calls'][k]):
            per = r['calls'][name] / n
            us = r['ctime'].get(name, 0.0) / max(1, r['calls'][name])
            parts.append('%s %.2f (%s %.0f us)' % (name, per, 'blocks' if name in BLOCKING else 'each', us))
        print('  ring thread calls per request: ' + ', '.join(parts))
    busy = sorted(r['irqs'], key=lambda k: -r['irqs'][k])[:4]
    print('  per request: %.1f context switches; interrupts %s' %
          (r['switches'], ', '.join('%s %.2f' % (k, r['irqs'][k] / n) for k in busy)))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().split('\n')[0], file=sys.stderr)
        return 2
    bad = 0
    for path in argv[1:]:
        try:
            r, why = analyse(path)
        except OSError as e:
            r, why = None, str(e)
        if r is None:
            print('%s: %s' % (path, why))
            bad = 1
            continue
        report(path, r)
    return bad


if __name__ == '__main__':
    sys.exit(main(sys.argv))
