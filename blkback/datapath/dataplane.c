/*
 * dataplane.c: the closed box of dataplane.h: a ring made, started,
 * stopped and reported through whatever serves it (ring-impl.h's table:
 * a thread here, ring-thread.c, or a worker, workers/ring-proxy.c), the
 * journal's name for it, and the one setter of its life with the table
 * of its legal edges.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/datapath/journal.h"
#include "blkback/datapath/ring-impl.h"

void xbd_ring_base_init(struct xbd_ring *r, const struct xbd_ring_ops *ops,
			struct xbd_disk *disk, unsigned int idx)
{
	r->ops = ops;
	r->disk = disk;
	r->idx = idx;
	if (disk->nr_rings > 1)
		snprintf(r->name, sizeof(r->name), "%s queue %u", disk->name, idx);
	else
		snprintf(r->name, sizeof(r->name), "%s", disk->name);
	r->p.journal_fd = r->p.evtchn_fd = r->p.cpu = -1;
	r->rep.port = -1;
	r->cpu = -1;
	r->irq_tag[0] = '\0';
	r->stats = &r->own_stats;
	r->seen = &r->own_seen;
}

struct xbd_ring *xbd_ring_new(struct xbd_ring_server *srv, struct xbd_disk *disk,
			      unsigned int idx)
{
	return srv->ops->create(srv, disk, idx);
}

int xbd_ring_start(struct xbd_ring *r, const struct xbd_ring_params *p)
{
	int err;

	r->p = *p;
	r->stop = false;
	memset(&r->rep, 0, sizeof(r->rep));
	r->rep.port = -1;
	r->stats = p->stats ? p->stats : &r->own_stats;
	r->seen = p->seen ? p->seen : &r->own_seen;
	err = r->ops->start(r);
	if (err != -EINPROGRESS)
		r->rep.start_err = err;
	return err;
}

void xbd_ring_request_stop(struct xbd_ring *r)
{
	r->ops->request_stop(r);
}

void xbd_ring_stop(struct xbd_ring *r)
{
	r->ops->stop(r);
}

void xbd_ring_free(struct xbd_ring *r)
{
	if (r)
		r->ops->destroy(r);
}

bool xbd_ring_exited(const struct xbd_ring *r)
{
	enum xbd_ring_life life;

	if (!r)
		return true;
	life = xbd_ring_life(r);
	return life == XBD_RING_IDLE || life == XBD_RING_EXITED;
}

void xbd_ring_report(const struct xbd_ring *r, struct xbd_ring_report *rep)
{
	*rep = r->rep;
	rep->failed = __atomic_load_n(&r->rep.failed, __ATOMIC_RELAXED);
}

const struct xbd_ring_stats *xbd_ring_stats(const struct xbd_ring *r)
{
	return r->stats;
}

const char *xbd_ring_name(const struct xbd_ring *r)
{
	return r->name;
}

bool xbd_ring_view(const struct xbd_ring *r, struct xbd_ring_view *v)
{
	const struct xbd_ring_seen *s = r->seen;

	if (!r->ops->shared(r, &v->seen.shared))
		return false;
	v->seen.req_cons = __atomic_load_n(&s->req_cons, __ATOMIC_RELAXED);
	v->seen.rsp_pushed = __atomic_load_n(&s->rsp_pushed, __ATOMIC_RELAXED);
	v->seen.inflight = __atomic_load_n(&s->inflight, __ATOMIC_RELAXED);
	v->seen.spurious = __atomic_load_n(&s->spurious, __ATOMIC_RELAXED);
	v->seen.masked_port = __atomic_load_n(&s->masked_port, __ATOMIC_RELAXED);
	v->seen.asleep_since = __atomic_load_n(&s->asleep_since, __ATOMIC_RELAXED);
	v->port = r->rep.port;
	v->cpu = r->cpu;
	return true;
}

/* The states each life may be entered from (ring-impl.h says what each is). */
#define RING_L(life) (1u << (life))
static const uint8_t ring_entered_from[] = {
	/* A thread that could not be made; a ring joined, or taken back from its worker. */
	[XBD_RING_IDLE] = RING_L(XBD_RING_RUNNING) | RING_L(XBD_RING_EXITED),
	[XBD_RING_RUNNING] = RING_L(XBD_RING_IDLE),
	[XBD_RING_DRAINING] = RING_L(XBD_RING_RUNNING),
	[XBD_RING_RETIRING] = RING_L(XBD_RING_RUNNING) | RING_L(XBD_RING_DRAINING),
	/* Its thread's end; a worker's ring as the worker's answers (or its death) say. */
	[XBD_RING_EXITED] = RING_L(XBD_RING_RUNNING) | RING_L(XBD_RING_DRAINING) |
			    RING_L(XBD_RING_RETIRING),
};

static const char *const ring_life_names[] = {
	[XBD_RING_IDLE] = "IDLE", [XBD_RING_RUNNING] = "RUNNING", [XBD_RING_DRAINING] = "DRAINING",
	[XBD_RING_RETIRING] = "RETIRING", [XBD_RING_EXITED] = "EXITED",
};

void xbd_ring_set_life(struct xbd_ring *r, enum xbd_ring_life to)
{
	enum xbd_ring_life from = xbd_ring_life(r);

	/* Staying where it is is no edge. */
	if (from != to && !(ring_entered_from[to] & RING_L(from))) {
		static bool said;

		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			xbd_log(XBD_LOG_ERR, "%s: its life went from %s to %s (a bug in xbd-back)",
				r->name, ring_life_names[from], ring_life_names[to]);
#ifdef XBD_TEST_HOOKS
		abort();
#endif
	}
	__atomic_store_n(&r->life, to, __ATOMIC_RELEASE);
}

void xbd_ring_journal_id(const struct xbd_disk *disk, unsigned int idx,
			 const struct xbd_ring_params *p, struct xbd_journal_id *id)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->type, sizeof(id->type), "%s", disk->type);
	id->domid = disk->domid;
	id->devid = disk->devid;
	id->queue = idx;
	id->nr_queues = disk->nr_rings;
	id->abi = disk->abi;
	id->nr_pages = p->nr_pages;
	id->remote_port = p->remote_port;
	id->nr_ents = xring_size(disk->abi, p->nr_pages);
	memcpy(id->refs, p->refs, p->nr_pages * sizeof(id->refs[0]));
}
