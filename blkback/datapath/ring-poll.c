/*
 * ring-poll.c: a ring thread's adaptive polling and its sleep
 * (ring-thread.h; its clock is ring-clock.c's).  Before blocking it may busy-poll the ring's producer
 * index and the storage for up to its window, each source with a window
 * of its own; then it sleeps on the event channel, the engine's fd and
 * the stop eventfd (or in the engine's own wait), masking a port that
 * only sends spurious notifications, and says what it saw for xbdctl.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "blkback/datapath/ring-thread.h"
#include "common/mark.h"

/*
 * A ring held back by its disk's I/O limits looks at them again at least
 * this often: a limit raised or removed by xbdctl set takes effect within
 * it (10 wake-ups a second while held, nothing otherwise).
 */
#define THROTTLE_RECHECK_NS 100000000ull


/* ---- polling and sleeping ---- */

/* Spins between clock reads while polling (each spin: two loads and a pause). */
#define POLL_CLOCK_SPINS 16

/*
 * Where a clock read is a system call, the polling loop does not read it:
 * it counts its window in spins by the spin's calibrated cost (a window
 * may run over or short by that estimate's error), and the sleep that
 * follows a miss starts at the estimated end.  What a hit finds is
 * stamped with a real read.
 */
static unsigned int poll_clock_spins(uint64_t window_ns)
{
	uint64_t n = (window_ns * 1000 + ring_spin_ps() - 1) / ring_spin_ps();

	if (!ring_clock_dear() || n < POLL_CLOCK_SPINS)
		return POLL_CLOCK_SPINS;
	return n > 1u << 20 ? 1u << 20 : (unsigned int)n;
}

/* The polling settings, which xbdctl may change at any time (control.c). */
static uint64_t poll_max(const struct xbd_bring *br)
{
	return __atomic_load_n(&br->base.disk->o.poll_max_ns, __ATOMIC_RELAXED);
}

static void poll_adjust(struct xbd_bring *br, struct bk_poll *p, uint64_t block_ns, bool woke)
{
	const struct xbd_disk_opts *o = &br->base.disk->o;
	uint64_t max = poll_max(br);
	unsigned int grow = __atomic_load_n(&o->poll_grow, __ATOMIC_RELAXED);
	unsigned int shrink = __atomic_load_n(&o->poll_shrink, __ATOMIC_RELAXED);

	if (block_ns > max) {
		p->ns = shrink ? p->ns / shrink : 0;
	} else if (woke && block_ns > p->ns) {
		/* QEMU: first window 4 us, then doubled, capped at poll-max-ns. */
		p->ns = p->ns ? p->ns * (grow ? grow : 2) : 4000;
	}
	if (p->ns > max)
		p->ns = max;
}

/*
 * Busy-poll the ring's producer index and the storage for up to the
 * current window.  Each source keeps its own window, so a slow disk does
 * not switch polling off for a fast guest.  True if work was found.
 */
bool ring_poll(struct xbd_bring *br)
{
	const struct xbd_engine *eng = br->base.disk->eng;
	uint64_t w = br->poll_ring.ns, t0, t, max = poll_max(br);
	unsigned int every;
	/* Held back by the disk's limits: new requests would only queue behind. */
	bool ring_ok = !br->base.stop && !br->base.rep.failed && !br->barrier && !br->starved && !br->throttled;

	if (!max)
		return false;
	if (!ring_ok)
		w = 0;
	if (br->inflight && br->poll_io.ns > w)
		w = br->poll_io.ns;
	/* The cap may have been lowered since the window grew. */
	if (w > max)
		w = max;
	if (!w)
		return false;
	/* What runs from here to the end marks is counted apart as polling (common/mark.h). */
	XBD_MARK(XBD_MARK_POLL_BEGIN);
	/* What the engine keeps for its wait must reach the kernel before we look for its completion. */
	if (br->inflight && eng->wait && !br->epoll_only) {
		unsigned int none;

		eng->wait(br->q, NULL, 0, 0, &none);
	}
	t0 = ring_since(br);
	/*
	 * The clock is read every POLL_CLOCK_SPINS spins, not every one, and
	 * where a read is a system call (a PV dom0) not at all.
	 */
	every = poll_clock_spins(w);
	for (unsigned int spin = 1;; spin++) {
		if (ring_ok && xring_back_pending(&br->ring) != 0) {
			t = br->turn_ns = ring_now(br);
			XBD_STAT_INC(br->base.stats, poll_hits);
			XBD_STAT_ADD(br->base.stats, poll_ns, t - t0);
			XBD_MARK(XBD_MARK_POLL_END);
			return true;
		}
		/* Completions are looked for in memory first: no syscall per spin. */
		if (br->inflight && (!eng->queue_ready || eng->queue_ready(br->q)) && ring_reap(br)) {
			t = br->turn_ns;
			XBD_STAT_INC(br->base.stats, poll_hits);
			XBD_STAT_ADD(br->base.stats, poll_ns, t - t0);
			XBD_MARK(XBD_MARK_POLL_END);
			return true;
		}
		ring_spin_pause();
		if (spin % every)
			continue;
		if (ring_clock_dear()) {
			t = br->clock_ns = t0 + (uint64_t)spin * ring_spin_ps() / 1000;
			br->clock_turn = true;
		} else {
			t = ring_now(br);
		}
		if (t - t0 >= w)
			break;
	}
	XBD_STAT_INC(br->base.stats, poll_misses);
	XBD_STAT_ADD(br->base.stats, poll_ns, t - t0);
	XBD_MARK(XBD_MARK_POLL_END);
	return false;
}

/*
 * A ring notification arrived on port (now masked).  It is spurious when
 * the ring holds no request and none was consumed since the previous
 * wake-up (polling or the final check may have taken the requests it
 * announced).  Up to one spurious wake-up in a row is normal; after that
 * the port stays masked for 1, 2, 4 ... ms, at most 1 s, so a guest that
 * floods notifications gets a ring thread that sleeps, not one that spins.
 * Any real request resets the count.
 */
static void ring_event(struct xbd_bring *br, int port)
{
	bool useful = xring_back_pending(&br->ring) != 0 || br->consumed != br->wake_consumed;

	br->wake_consumed = br->consumed;
	if (useful || br->base.stop || br->base.rep.failed) {
		br->spurious = 0;
	} else if (++br->spurious > 1) {
		unsigned int shift = br->spurious - 2 < 10 ? br->spurious - 2 : 10;
		uint64_t delay_ms = (1ull << shift) < 1000 ? (1ull << shift) : 1000;

		if (br->masked_port >= 0 && br->masked_port != port)
			xbd_evtchn_unmask(br->evtchn, (uint32_t)br->masked_port);
		br->masked_port = port;
		br->unmask_at = ring_since(br) + delay_ms * 1000000ull;
		return;
	}
	xbd_evtchn_unmask(br->evtchn, (uint32_t)port);
}

/* An epoll timeout (ms, -1 = none) shortened to end by the deadline due (ns). */
static int wake_by(int timeout, uint64_t due, uint64_t now)
{
	int ms = due > now ? (int)((due - now + 999999) / 1000000) : 0;

	return timeout < 0 || ms < timeout ? ms : timeout;
}

/* What the control socket shows of this ring while the thread sleeps. */
static void publish_seen(struct xbd_bring *br, uint64_t now)
{
	struct xbd_ring_seen *s = br->base.seen;
	struct xring_shared_idx sh;

	xring_read_shared(&br->ring, &sh);
	__atomic_store_n(&s->shared.req_prod, sh.req_prod, __ATOMIC_RELAXED);
	__atomic_store_n(&s->shared.req_event, sh.req_event, __ATOMIC_RELAXED);
	__atomic_store_n(&s->shared.rsp_prod, sh.rsp_prod, __ATOMIC_RELAXED);
	__atomic_store_n(&s->shared.rsp_event, sh.rsp_event, __ATOMIC_RELAXED);
	__atomic_store_n(&s->req_cons, br->ring.req_cons, __ATOMIC_RELAXED);
	__atomic_store_n(&s->rsp_pushed, br->ring.prod_pushed, __ATOMIC_RELAXED);
	__atomic_store_n(&s->inflight, br->inflight, __ATOMIC_RELAXED);
	__atomic_store_n(&s->spurious, br->spurious, __ATOMIC_RELAXED);
	__atomic_store_n(&s->masked_port, br->masked_port, __ATOMIC_RELAXED);
	__atomic_store_n(&s->asleep_since, now ? now : 1, __ATOMIC_RELAXED);
}

/*
 * The engine's own wait, where it has one (uring: the event channel and
 * the stop eventfd polled in its ring, the submissions it kept made by the
 * same call): what woke us as epoll would say it, or -1 to use epoll.
 */
static int wait_engine(struct xbd_bring *br, struct epoll_event *ev, int timeout)
{
	const struct xbd_engine *eng = br->base.disk->eng;
	int fds[2] = { xbd_evtchn_fd(br->evtchn), br->stop_fd }, err, n = 0;
	unsigned int ready = 0;

	if (!eng->wait || br->epoll_only)
		return -1;
	err = eng->wait(br->q, fds, 2, timeout, &ready);
	if (err == -EOPNOTSUPP) {
		br->epoll_only = true;
		return -1;
	}
	if (err && err != -ETIME)
		xbd_log_limited(&br->base.disk->crl, XBD_LOG_WARNING, "%s: waiting in the engine: %s",
				br->base.name, strerror(-err));
	if (ready & 1)
		ev[n++].data.u32 = 0;
	if (eng->queue_ready(br->q))
		ev[n++].data.u32 = 1;
	if (ready & 2)
		ev[n++].data.u32 = 2;
	return n;
}

/* Block on the event channel, the completion eventfd and the stop eventfd. */
void ring_wait(struct xbd_bring *br)
{
	struct epoll_event ev[3];
	bool woke_ring = false, woke_io = false, had_io = br->inflight > 0;
	uint64_t t0 = ring_since(br), t1, block_ns;
	int n, i, timeout = -1;

	/* Submission refused with nothing in flight: retry shortly. */
	if (br->submit_head && !br->inflight && !br->throttled)
		timeout = 1;
	/*
	 * The disk's limits hold requests back: until they let the next one
	 * go, and at least every THROTTLE_RECHECK_NS, since xbdctl set may
	 * raise or remove them meanwhile (nothing wakes a ring for that).
	 */
	if (br->throttled)
		timeout = wake_by(timeout, br->throttle_due < t0 + THROTTLE_RECHECK_NS ?
				  br->throttle_due : t0 + THROTTLE_RECHECK_NS, t0);
	/* A masked port to unmask, and the oldest retired mapping to unmap. */
	if (br->masked_port >= 0)
		timeout = wake_by(timeout, br->unmask_at, t0);
	if (grant_retire_deadline(br))
		timeout = wake_by(timeout, grant_retire_deadline(br), t0);
	publish_seen(br, t0);
	n = wait_engine(br, ev, timeout);
	if (n < 0)
		n = epoll_wait(br->epfd, ev, 3, timeout);
	__atomic_store_n(&br->base.seen->asleep_since, 0, __ATOMIC_RELAXED);
	/* The wake-up's one clock read: the polling windows and the masked port need it. */
	br->clock_turn = false;
	t1 = poll_max(br) || br->masked_port >= 0 ? ring_now(br) : t0;
	/* A poll's estimated end (a dear clock) may be a little ahead of the wake-up's read. */
	block_ns = t1 > t0 ? t1 - t0 : 0;
	/* What woke us came before t1: the consume and the reap that follow may take it as theirs. */
	if (t1 != t0) {
		br->turn_ns = t1;
		br->turn_woke = true;
	}
	if (br->masked_port >= 0 && t1 >= br->unmask_at) {
		xbd_evtchn_unmask(br->evtchn, (uint32_t)br->masked_port);
		br->masked_port = -1;
		woke_ring = true;
	}
	for (i = 0; i < n; i++) {
		if (ev[i].data.u32 == 0) {
			/*
			 * One read per wake-up: the fd carries this ring's one
			 * port, and another one pending would make the
			 * (level-triggered) epoll report it again.  Reading on
			 * to EAGAIN would cost a system call per request.
			 */
			int port = xbd_evtchn_pending(br->evtchn);

			if (port >= 0) {
				XBD_STAT_INC(br->base.stats, notify_recv);
				ring_event(br, port);
			}
			woke_ring = true;
		} else if (ev[i].data.u32 == 1) {
			woke_io = true;
		} else {
			uint64_t v;

			if (read(br->stop_fd, &v, sizeof(v)) < 0) {
				/* Already drained; stop is set anyway. */
			}
			br->base.stop = true;
		}
	}
	if (poll_max(br)) {
		poll_adjust(br, &br->poll_ring, block_ns, woke_ring);
		if (had_io)
			poll_adjust(br, &br->poll_io, block_ns, woke_io);
	}
}

