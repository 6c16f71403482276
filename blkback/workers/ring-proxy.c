/*
 * ring-proxy.c: a ring a worker serves, as the main process holds it
 * (struct wring: one more way of serving a ring, ring-impl.h's wring_ops).
 * Its start is RING_START with its journal and event channel fds, its
 * answer a message the main loop handles when it comes; its stop waits
 * for the worker's RING_EXITED within a deadline; its counters are a slot
 * of the memory the worker shares, taken back when it stops.  Every
 * answer is checked against what was asked (a worker that answers what
 * it was not asked is killed).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blkback/datapath/ringcpu.h"
#include "blkback/workers/supervisor.h"
#include "common/clock.h"

/* The ring w serves as ring idx of its device wid, or NULL. */
static struct wring *wring_find(struct xbd_worker *w, uint32_t wid, uint32_t idx)
{
	for (unsigned int i = 0; i < XBD_WORKER_SLOTS; i++)
		if (w->rings[i] && w->rings[i]->wid == wid && w->rings[i]->base.idx == idx)
			return w->rings[i];
	return NULL;
}

/* A ring its worker served has ended (its answer, its start's failure, or its worker's death). */
void wring_exited(struct wring *wr)
{
	xbd_ring_set_life(&wr->base, XBD_RING_EXITED);
}

/*
 * Start wr in worker w at counter slot (counting on from what the slot
 * holds): RING_START with its journal and, on Xen, an event channel fd
 * bound to the frontend's domain only.  -EINPROGRESS: asked; its answer
 * comes as a message (wring_started), within ANSWER_TIMEOUT_MS or the
 * worker is killed.  Meanwhile wr is a ring that runs (its stop is sent
 * after the start) with rep.start_pending set.  restart: it resumes a dead
 * worker's ring, which runs on.
 */
int wring_start_in(struct wring *wr, struct xbd_worker *w, unsigned int slot, bool restart)
{
	struct xbd_ring *r = &wr->base;
	struct xbd_wmsg m;
	struct xbd_wmsg_ring_start *rs = &m.u.ring_start;
	int fds[2], efd = -1, err;
	unsigned int nfds = 0;

	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_RING_START;
	m.dev = wr->wd->wid;
	m.ring = r->idx;
	rs->nr_pages = r->p.nr_pages;
	memcpy(rs->refs, r->p.refs, sizeof(rs->refs));
	rs->remote_port = r->p.remote_port;
	rs->slot = slot;
	rs->resume = r->p.resume;
	/* A restart keeps the slot, whose counters took the requests it runs again. */
	rs->redo_counted = restart;
	rs->cpu = r->cpu;
	/* A dead worker's end of the channel, which only we can tell is dead (sim). */
	if (r->p.resume)
		xbd_evtchn_reclaim(w->ws->host->plat, r->disk->domid, r->p.remote_port);
	if (r->p.journal_fd >= 0) {
		rs->journal = 1;
		fds[nfds++] = r->p.journal_fd;
	}
	if (!w->ws->sim) {
		char saved[XBD_RINGCPU_TAG_LEN];
		bool restricted;

		/* Its interrupt, made when the worker binds the fd, is named after us. */
		xbd_ringcpu_tag(r->irq_tag, saved);
		efd = xbd_xen_evtchn_open_for(r->disk->domid, &restricted);
		xbd_ringcpu_untag(r->irq_tag, saved);
		if (efd < 0)
			return efd;
		if (!restricted && !(w->ws->said & XBD_CONFINE_EVTCHN))
			workers_said_skipped(w->ws, w, XBD_CONFINE_EVTCHN);
		rs->evtchn = 1;
		fds[nfds++] = efd;
	}
	err = worker_send(w, &m, fds, nfds);
	if (efd >= 0)
		close(efd);
	if (err)
		return err;
	wr->w = w;
	wr->slot = slot;
	w->rings[slot] = wr;
	wr->wid = wr->wd->wid;
	wr->start_restart = restart;
	r->stats = &w->slots[slot].stats;
	r->seen = &w->slots[slot].seen;
	r->stop = false;
	__atomic_store_n(&r->rep.failed, false, __ATOMIC_RELAXED);
	/* A dead worker's ring runs on, in the new one. */
	if (!restart)
		xbd_ring_set_life(r, XBD_RING_RUNNING);
	r->rep.start_pending = true;
	r->rep.start_err = 0;
	if (!w->owed++) {
		w->answer_deadline = xbd_mono_ms() + ANSWER_TIMEOUT_MS;
		workers_arm_timer(w->ws);
	}
	return -EINPROGRESS;
}

/* A dead worker's device whose rings all answered in its successor: said once. */
static void restart_said(struct xbd_wdev *wd, struct xbd_worker *w)
{
	unsigned int i, redone = 0, n = 0;

	for (i = 0; i < XBD_WORKER_SLOTS; i++) {
		const struct wring *wr = w->rings[i];

		if (!wr || wr->wd != wd || !wr->start_restart)
			continue;
		if (wr->base.rep.start_pending)
			return;
		if (!wr->base.rep.start_err) {
			redone += wr->base.rep.nredo;
			n++;
		}
	}
	if (n)
		XBD_DISK_LOG(wd->disk, XBD_LOG_INFO, "resumed after its worker died: %u request%s re-executed",
		     redone, redone == 1 ? "" : "s");
}

/* RING_STARTED: the answer wr's start waited for. */
static void wring_started(struct xbd_worker *w, struct wring *wr, const struct xbd_wmsg *m)
{
	struct xbd_ring *r = &wr->base;
	int err = m->u.ring_started.err;

	r->rep.start_pending = false;
	w->answer_deadline = --w->owed ? xbd_mono_ms() + ANSWER_TIMEOUT_MS : 0;
	workers_arm_timer(w->ws);
	r->rep.journal_err = m->u.ring_started.journal_err;
	r->rep.nredo = m->u.ring_started.nredo;
	r->rep.resumed = m->u.ring_started.resumed;
	if (err) {
		/* Nothing runs there: the ring has stopped; its slot goes with wring_stop. */
		r->rep.start_err = err < 0 ? err : -EIO;
		wring_exited(wr);
		workers_wake_main(w->ws);
	} else {
		r->rep.port = m->u.ring_started.port;
		xbd_ringcpu_place_irq(r->name, r->cpu, r->irq_tag);
	}
	if (!wr->start_restart) {
		/* The connect that waits for it takes its next step. */
		wr->wd->step(wr->wd->arg);
		return;
	}
	if (r->rep.start_err) {
		/* Not taken over: the device is closed (its failed ring says so). */
		xbd_ring_set_failed(r);
		xbd_log_limited(&r->disk->crl, XBD_LOG_ERR, "%s: cannot take the ring over in a "
				"new worker: %s", r->name, strerror(-r->rep.start_err));
	}
	restart_said(wr->wd, w);
}

/* A message about one of its rings (RING_*): handled (true), or not one (false). */
static bool wring_msg(struct xbd_worker *w, const struct xbd_wmsg *m)
{
	struct wring *wr;

	switch (m->type) {
	case XBD_WMSG_RING_FAILED:
		wr = wring_find(w, m->dev, m->ring);
		if (wr && xbd_ring_life(&wr->base) != XBD_RING_IDLE) {
			xbd_ring_set_failed(&wr->base);
			workers_wake_main(w->ws);
		}
		return true;
	case XBD_WMSG_RING_EXITED:
		wr = wring_find(w, m->dev, m->ring);
		if (wr && !xbd_ring_exited(&wr->base)) {
			wr->base.rep.stop_inflight = m->u.ring_exited.stop_inflight;
			wr->base.rep.stop_busy = m->u.ring_exited.busy;
			wr->base.rep.stop_left = m->u.ring_exited.left;
			/* Only given back to this domain's next worker, which checks it. */
			if (m->u.ring_exited.thr.at_ns)
				wr->base.disk->thr_state = m->u.ring_exited.thr;
			wring_exited(wr);
			workers_wake_main(w->ws);
		}
		return true;
	case XBD_WMSG_RING_STARTED:
		wr = wring_find(w, m->dev, m->ring);
		if (!wr || !wr->base.rep.start_pending) {
			worker_kill(w, "answered a question it was not asked");
			return true;
		}
		wring_started(w, wr, m);
		return true;
	default:
		return false;
	}
}

/* wring_ops.create: a ring of the device wd's binding serves. */
/* A message nobody waits for: a log line, a ring that failed or exited. */
void worker_handle_msg(struct xbd_worker *w, const struct xbd_wmsg *m)
{
	/* Killed for a broken rule or deadline: what it says no longer counts. */
	if (w->kill == WORKER_KILL_FAULT)
		return;
	switch (m->type) {
	case XBD_WMSG_LOG: {
		char text[XBD_WORKER_LOG_MAX];

		memcpy(text, m->u.log.text, sizeof(text));
		text[sizeof(text) - 1] = '\0';
		worker_log(w, m->u.log.level, text);
		return;
	}
	default:
		/* A ring's answer or news (ring-proxy.c), or what it may not send. */
		if (!wring_msg(w, m))
			worker_kill(w, "sent a message it may not send");
	}
}

static struct xbd_ring *wring_create(struct xbd_ring_server *srv, struct xbd_disk *disk,
				     unsigned int idx)
{
	struct wring *wr = calloc(1, sizeof(*wr));

	if (!wr)
		return NULL;
	xbd_ring_base_init(&wr->base, &wring_ops, disk, idx);
	wr->wd = (struct xbd_wdev *)srv;
	return &wr->base;
}

/* wring_ops.start: ask the device's worker to start the ring (its answer is due). */
static int wring_start(struct xbd_ring *r)
{
	struct wring *wr = (struct wring *)r;
	struct xbd_worker *w = wr->wd->worker;
	unsigned int slot;
	int err;

	/* Kept when a worker is replaced: only a new connection picks again. */
	if (r->cpu < 0)
		r->cpu = xbd_ringcpu_pick();
	if (!w || !worker_ready_now(w))
		return -ESRCH;
	for (slot = 0; slot < XBD_WORKER_SLOTS && w->rings[slot]; slot++)
		;
	if (slot == XBD_WORKER_SLOTS)
		return -ENOSPC;
	memset(&w->slots[slot], 0, sizeof(w->slots[slot]));
	err = wring_start_in(wr, w, slot, false);
	return err;
}

/* wring_ops.request_stop */
static void wring_request_stop(struct xbd_ring *r)
{
	struct wring *wr = (struct wring *)r;
	struct xbd_wmsg m;

	if (r->stop || xbd_ring_exited(r))
		return;
	r->stop = true;
	memset(&m, 0, sizeof(m));
	m.type = XBD_WMSG_RING_STOP;
	m.dev = wr->wid;
	m.ring = r->idx;
	worker_send(wr->w, &m, NULL, 0);
}

/*
 * wring_ops.stop: wait (bounded) for the worker to stop the ring, then
 * take its counters back.  A ring no worker took (its start failed before,
 * or it was stopped already) holds nothing here.
 */
static void wring_stop(struct xbd_ring *r)
{
	struct wring *wr = (struct wring *)r;
	struct xbd_worker *w = wr->w;

	xbd_ringcpu_put(r->cpu);
	r->cpu = -1;
	if (!w)
		return;
	if (!xbd_ring_exited(r)) {
		uint64_t deadline = w->ws->host->stop_deadline_ms ? w->ws->host->stop_deadline_ms
				    : xbd_mono_ms() + ANSWER_TIMEOUT_MS;

		wring_request_stop(r);
		/*
		 * As a thread is joined, until it answered everything or its
		 * worker died, but never past the deadline: then its worker is
		 * killed, and the ring's journal keeps what it had taken and not
		 * answered for the next daemon, as after a crash.
		 */
		while (!xbd_ring_exited(r) && w->pid && worker_ready_now(w)) {
			struct xbd_wmsg m;
			int fds[XBD_WMSG_MAX_FDS];
			unsigned int nfds = 0, i;
			uint64_t now = xbd_mono_ms();
			int err;

			if (now >= deadline) {
				xbd_log_limited(&r->disk->crl, XBD_LOG_WARNING, "%s: not stopped by the "
						"deadline: %s killed, its journal keeps what it had "
						"not answered", r->name, w->name);
				worker_kill_asked(w);
				break;
			}
			worker_flush(w);
			err = xbd_wmsg_recv(w->sock, &m, fds, &nfds,
					    (int)(deadline - now < 50 ? deadline - now : 50));

			for (i = 0; i < nfds; i++)
				close(fds[i]);
			if (err == -ETIMEDOUT || err == -EAGAIN)
				continue;
			if (err)
				break;
			worker_handle_msg(w, &m);
		}
		if (!xbd_ring_exited(r)) {
			r->disk->unclean = true;
			wring_exited(wr);
		}
	}
	/* The counters stay with the device (xbdctl's totals); the slot is free again. */
	r->own_stats = w->slots[wr->slot].stats;
	r->stats = &r->own_stats;
	r->seen = &r->own_seen;
	w->rings[wr->slot] = NULL;
	wr->w = NULL;
	xbd_ring_set_life(r, XBD_RING_IDLE);
}

/* wring_ops.destroy */
static void wring_destroy(struct xbd_ring *r)
{
	free(r);
}

/* wring_ops.shared: mapped in its worker only: the header as its thread last saw it. */
static bool wring_shared(const struct xbd_ring *r, struct xring_shared_idx *sh)
{
	const struct wring *wr = (const struct wring *)r;
	const struct xbd_ring_seen *seen = r->seen;

	if (!wr->w)
		return false;
	sh->req_prod = __atomic_load_n(&seen->shared.req_prod, __ATOMIC_RELAXED);
	sh->req_event = __atomic_load_n(&seen->shared.req_event, __ATOMIC_RELAXED);
	sh->rsp_prod = __atomic_load_n(&seen->shared.rsp_prod, __ATOMIC_RELAXED);
	sh->rsp_event = __atomic_load_n(&seen->shared.rsp_event, __ATOMIC_RELAXED);
	return true;
}


const struct xbd_ring_ops wring_ops = {
	.create = wring_create,
	.start = wring_start,
	.request_stop = wring_request_stop,
	.stop = wring_stop,
	.destroy = wring_destroy,
	.shared = wring_shared,
};
