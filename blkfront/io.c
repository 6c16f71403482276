/*
 * io.c: the data path of libxbdfront.  A caller's request becomes one or
 * more ring requests (shadows); shadows wait on their queue until the
 * ring has room and the backend is connected; responses are checked
 * against the shadow they claim to answer before anything is trusted.
 *
 * Flush and FUA follow Linux blkfront: feature-flush-cache makes a flush
 * a FLUSH_DISKCACHE and a FUA write a write followed by a flush;
 * feature-barrier alone makes both WRITE_BARRIER (which carries the data,
 * and so is never indirect); neither means the backend writes through
 * and a flush completes at once.  A flush, barrier or discard answered
 * with EOPNOTSUPP drops that feature.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkfront/front-internal.h"

#define STAT_ADD(f, field, n) __atomic_add_fetch(&(f)->stats.field, (n), __ATOMIC_RELAXED)

/* What submit needs of the negotiated state, read under f->lock once. */
struct snap {
	int broken;
	uint64_t size;
	unsigned int sector_size;
	bool readonly, flush, barrier, discard;
	unsigned int max_segs;
	unsigned int nr_queues;
};

static void take_snap(struct xbd_front *f, struct snap *sn)
{
	pthread_mutex_lock(&f->lock);
	sn->broken = f->broken;
	sn->size = f->info.size;
	sn->sector_size = f->info.sector_size ? f->info.sector_size : 512;
	sn->readonly = f->info.readonly;
	sn->flush = f->info.flush;
	sn->barrier = f->info.barrier;
	sn->discard = f->info.discard;
	sn->max_segs = f->info.max_segs ? f->info.max_segs : BLKIF_MAX_SEGMENTS_PER_REQUEST;
	sn->nr_queues = f->info.nr_queues ? f->info.nr_queues : 1;
	pthread_mutex_unlock(&f->lock);
}

static struct xbdf_shadow *shadow_new(struct xbdf_io *io, uint8_t op, uint64_t sector)
{
	struct xbdf_shadow *s = malloc(sizeof(*s));

	if (!s)
		return NULL;
	/* only the header: pages[] and pool[] are filled as used */
	memset(s, 0, offsetof(struct xbdf_shadow, pages));
	s->io = io;
	s->op = op;
	s->sector = sector;
	return s;
}

static void shadow_free(struct xbdf_shadow *s)
{
	free(s->wbuf);
	free(s);
}

/*
 * q->lock held: give a shadow's pages for len bytes (+ indirect pages).
 * Over the grant budget, or when take is false, the shadow waits without
 * pages (nopages) and gets them when it reaches the head of the wait list.
 */
static int shadow_pages(struct xbdf_queue *q, struct xbdf_shadow *s, uint32_t len, bool indirect,
			bool take)
{
	unsigned int nsegs = (len + XBD_PAGE_SIZE - 1) / XBD_PAGE_SIZE;
	unsigned int nind = indirect ?
		(nsegs + XBD_SEGS_PER_INDIRECT_PAGE - 1) / XBD_SEGS_PER_INDIRECT_PAGE : 0;
	int rc;

	s->len = len;
	s->nr_segs = nsegs;
	s->nr_ind = nind;
	s->indirect = indirect;
	if (!take) {
		s->nr_pages = 0;
		s->pooled = false;
		s->region = NULL;
		s->nopages = nsegs + nind > 0;
		return 0;
	}
	rc = xbdf_pages_get(q, s, nsegs + nind);
	if (rc == -EAGAIN) {
		s->nopages = true;
		return 0;
	}
	if (rc < 0)
		s->nr_segs = s->nr_ind = 0;
	return rc;
}

static void wait_append(struct xbdf_queue *q, struct xbdf_shadow *s)
{
	s->next = NULL;
	if (q->wait_tail)
		q->wait_tail->next = s;
	else
		q->wait_head = s;
	q->wait_tail = s;
}

/*
 * The wait list keeps one rule that makes a grant-budget deadlock
 * impossible: a shadow holding pages never waits behind one without.
 * Kick only ever gives pages to the head, so pages held further back
 * could otherwise be exactly what the head waits for, with nothing in
 * flight to give any back (the seq1m hang: two submitters, one copying
 * its write into pages it took while the other queued a nopages shadow
 * in front of it).
 */
static bool holds_pages(const struct xbdf_shadow *s)
{
	return !s->nopages && s->nr_pages > 0;
}

/* q->lock held: is any waiting shadow without its pages? */
static bool wait_has_nopages(const struct xbdf_queue *q)
{
	const struct xbdf_shadow *s;

	for (s = q->wait_head; s; s = s->next)
		if (s->nopages)
			return true;
	return false;
}

/*
 * q->lock held: give back a waiting shadow's pages (its write data moves
 * to wbuf) so that it gets new ones in its turn.  -ENOMEM leaves it as is.
 */
int xbdf_shadow_drop_pages(struct xbdf_queue *q, struct xbdf_shadow *s)
{
	if (!holds_pages(s))
		return 0;
	if (s->op != BLKIF_OP_READ && s->len) {
		uint8_t *w = malloc(s->len);

		if (!w)
			return -ENOMEM;
		xbdf_shadow_data_out(s, 0, w, s->len);
		free(s->wbuf);
		s->wbuf = w;
	}
	xbdf_pages_put(q, s);
	s->nopages = true;
	return 0;
}

/* q->lock held: write one shadow onto the ring under a free id. */
static int shadow_put(struct xbdf_queue *q, struct xbdf_shadow *s)
{
	struct xbd_front *f = q->f;
	struct xbd_request req;
	unsigned int id, i;
	int rc;

	memset(&req, 0, offsetof(struct xbd_request, seg));
	id = q->free_ids[q->nr_free - 1];
	req.id = id;
	req.operation = s->op;
	req.sector_number = s->sector;
	req.handle = (uint16_t)f->info.devid;
	if (s->op == BLKIF_OP_DISCARD) {
		req.nr_sectors = s->nr_sectors;
		req.discard_flags = s->discard_flags;
	} else {
		req.nr_segments = (uint16_t)s->nr_segs;
		for (i = 0; i < s->nr_segs; i++) {
			uint32_t off = i * XBD_PAGE_SIZE;
			uint32_t n = s->len - off < XBD_PAGE_SIZE ? s->len - off : XBD_PAGE_SIZE;

			req.seg[i].gref = s->pages[i].ref;
			req.seg[i].first_sect = 0;
			req.seg[i].last_sect = (uint8_t)((n >> XBD_SECTOR_SHIFT) - 1);
		}
		if (s->indirect) {
			/* the segments travel in the indirect pages, 512 per page */
			for (i = 0; i < s->nr_segs; i++) {
				struct blkif_request_segment seg;
				uint8_t *page = s->pages[s->nr_segs + i / XBD_SEGS_PER_INDIRECT_PAGE].addr;

				memset(&seg, 0, sizeof(seg));
				seg.gref = req.seg[i].gref;
				seg.first_sect = req.seg[i].first_sect;
				seg.last_sect = req.seg[i].last_sect;
				memcpy(page + (i % XBD_SEGS_PER_INDIRECT_PAGE) * sizeof(seg), &seg, sizeof(seg));
			}
			req.indirect = true;
			req.nr_indirect_pages = (uint16_t)s->nr_ind;
			for (i = 0; i < s->nr_ind; i++)
				req.indirect_grefs[i] = s->pages[s->nr_segs + i].ref;
		}
	}
	rc = xring_front_put_request(&q->ring, &req);
	if (rc < 0)
		return rc;
	q->nr_free--;
	q->slot[id] = s;
	STAT_ADD(f, requests, 1);
	if (s->indirect)
		STAT_ADD(f, indirect, 1);
	return 0;
}

/*
 * q->lock held, the head cannot get pages and nothing is in flight or
 * deferred to give any back.  With the wait-list rule kept this does not
 * happen; should it, the pages held further back are given up so the
 * head can go, rather than leaving the queue stuck.  Returns true when
 * that freed something worth another try.
 */
static bool unstrand(struct xbdf_queue *q)
{
	struct xbdf_shadow *s;
	bool freed = false;

	for (s = q->wait_head ? q->wait_head->next : NULL; s; s = s->next)
		if (holds_pages(s) && xbdf_shadow_drop_pages(q, s) == 0)
			freed = true;
	if (freed)
		fprintf(stderr, "xbd-front: vbd %u/%u: queue %u: waiting requests held the pages"
			" the first one needed; given back\n", q->f->info.domid, q->f->info.devid, q->idx);
	return freed;
}

/* q->lock held: move waiting shadows onto the ring while there is room. */
void xbdf_queue_kick(struct xbdf_queue *q)
{
	bool pushed = false;

	if (!q->live || !q->sring)
		return;
	while (q->wait_head && q->nr_free > 0 && xring_front_free(&q->ring) > 0) {
		struct xbdf_shadow *s = q->wait_head;

		if (s->nopages) {
			int rc = xbdf_pages_get(q, s, s->nr_segs + s->nr_ind);
			bool idle = q->nr_free == q->nr_slots && !pushed && !q->deferred;

			/*
			 * Not idle alone: a submitter may hold pages while it copies
			 * write data; it queues them in front of this one and kicks.
			 */
			if (rc == -EAGAIN && idle && unstrand(q))
				continue;
			if (rc == -EAGAIN && q->budget && s->nr_segs + s->nr_ind > q->budget)
				rc = -ENOSPC; /* larger than the whole budget: can never go */
			if (rc < 0 && (rc == -EAGAIN || q->nr_free < q->nr_slots || pushed))
				break; /* completions will give grants back */
			if (rc < 0) {
				/* nothing in flight to wait for: fail it (reap completes it) */
				q->wait_head = s->next;
				if (!q->wait_head)
					q->wait_tail = NULL;
				s->result = rc;
				s->next = q->failed;
				q->failed = s;
				continue;
			}
			s->nopages = false;
			if (s->wbuf) {
				xbdf_shadow_fill(s, s->wbuf);
				free(s->wbuf);
				s->wbuf = NULL;
			}
		}
		if (shadow_put(q, s) < 0)
			break;
		q->wait_head = s->next;
		if (!q->wait_head)
			q->wait_tail = NULL;
		s->next = NULL;
		pushed = true;
	}
	if (pushed && xring_front_push(&q->ring) && q->port >= 0) {
		xbd_evtchn_notify(q->evt, (uint32_t)q->port);
		STAT_ADD(q->f, notifies, 1);
	}
}

/* Shadows of one caller request, built before any is queued. */
struct build {
	struct xbdf_shadow *head, *tail;
	unsigned int n;
};

static void build_add(struct build *b, struct xbdf_shadow *s)
{
	s->next = NULL;
	if (b->tail)
		b->tail->next = s;
	else
		b->head = s;
	b->tail = s;
	b->n++;
}

/*
 * q->lock held: queue a built request.  One holding pages goes in front of
 * the first waiting shadow without (those arrived while its write data was
 * copied, so the two were concurrent and either order is right).
 */
static void wait_insert_build(struct xbdf_queue *q, struct build *b)
{
	struct xbdf_shadow **pp = &q->wait_head, *prev = NULL;

	if (holds_pages(b->head)) {
		while (*pp && !(*pp)->nopages) {
			prev = *pp;
			pp = &(*pp)->next;
		}
	} else {
		prev = q->wait_tail;
		pp = prev ? &prev->next : &q->wait_head;
	}
	b->tail->next = *pp;
	*pp = b->head;
	if (!b->tail->next)
		q->wait_tail = b->tail;
}

static void build_free(struct xbdf_queue *q, struct build *b)
{
	struct xbdf_shadow *s, *next;

	for (s = b->head; s; s = next) {
		next = s->next;
		xbdf_pages_put(q, s);
		shadow_free(s);
	}
}

static void complete_io(struct xbdf_io *io, int result)
{
	struct xbd_front *f = io->f;

	if (io->cb)
		io->cb(io->arg, result);
	free(io);
	atomic_fetch_sub(&f->inflight, 1);
}

/* A flush shadow for the current flush mode, or NULL when none applies. */
static uint8_t flush_op(const struct xbd_front *f)
{
	if (f->info.flush)
		return BLKIF_OP_FLUSH_DISKCACHE;
	if (f->info.barrier)
		return BLKIF_OP_WRITE_BARRIER;
	return 0;
}

/* Event thread: one ring request of io finished with result. */
static void io_part_done(struct xbdf_io *io, int result)
{
	struct xbd_front *f = io->f;

	if (result && !io->result)
		io->result = result;
	if (--io->parts)
		return;
	if (io->flush_after && !io->result) {
		struct xbdf_queue *q = &f->queues[io->queue];
		struct xbdf_shadow *s;
		uint8_t op;

		io->flush_after = false;
		pthread_mutex_lock(&f->lock);
		op = flush_op(f);
		pthread_mutex_unlock(&f->lock);
		if (op) {
			s = shadow_new(io, op, 0);
			if (!s) {
				complete_io(io, -ENOMEM);
				return;
			}
			io->parts = 1;
			pthread_mutex_lock(&q->lock);
			wait_append(q, s);
			xbdf_queue_kick(q);
			pthread_mutex_unlock(&q->lock);
			return;
		}
	}
	complete_io(io, io->result);
}

static int check_req(const struct snap *sn, const struct xbd_front_req *req)
{
	bool nocheck = req->flags & XBD_FRONT_NOCHECK;

	if (req->op == XBD_FRONT_FLUSH)
		return 0;
	if (req->op > XBD_FRONT_DISCARD)
		return -EINVAL;
	/* the wire counts 512-byte sectors: nothing finer can be expressed */
	if ((req->offset | req->len) & ((1u << XBD_SECTOR_SHIFT) - 1))
		return -EINVAL;
	if ((req->op == XBD_FRONT_READ || req->op == XBD_FRONT_WRITE) && req->len) {
		uint64_t sum = 0;
		int i;

		if (!req->iov && !req->buf)
			return -EINVAL;
		if (req->iov) {
			if (req->iovcnt <= 0)
				return -EINVAL;
			for (i = 0; i < req->iovcnt; i++) {
				if (!req->iov[i].iov_base && req->iov[i].iov_len)
					return -EINVAL;
				sum += req->iov[i].iov_len;
			}
			if (sum != req->len)
				return -EINVAL;
		}
	}
	if (nocheck)
		return 0;
	if (req->offset % sn->sector_size || req->len % sn->sector_size)
		return -EINVAL;
	if (req->offset > sn->size || req->len > sn->size - req->offset)
		return -EINVAL;
	if (req->op != XBD_FRONT_READ && sn->readonly)
		return -EROFS;
	if (req->op == XBD_FRONT_DISCARD && !sn->discard)
		return -EOPNOTSUPP;
	return 0;
}

/* The op a flush is sent as (what the backend offered, or asked anyway), or 0: none. */
static uint8_t flush_sent_as(const struct snap *sn, const struct xbd_front_req *req)
{
	/* NOCHECK: send what the caller asked even if the backend did not offer it. */
	if (req->flags & XBD_FRONT_NOCHECK)
		return BLKIF_OP_FLUSH_DISKCACHE;
	return sn->flush ? BLKIF_OP_FLUSH_DISKCACHE : sn->barrier ? BLKIF_OP_WRITE_BARRIER : 0;
}

/* The caller's request as an io on queue qi (its data: iov, or buf and len); NULL when out of memory. */
static struct xbdf_io *io_new(struct xbd_front *f, const struct xbd_front_req *req, int qi)
{
	struct xbdf_io *io = calloc(1, sizeof(*io));

	if (!io)
		return NULL;
	io->f = f;
	io->cb = req->cb;
	io->arg = req->arg;
	io->queue = qi;
	if (req->iov) {
		io->iov = req->iov;
		io->iovcnt = req->iovcnt;
	} else {
		io->one.iov_base = req->buf;
		io->one.iov_len = req->len;
		io->iov = &io->one;
		io->iovcnt = 1;
	}
	return io;
}

/*
 * A read or write as shadows into b, split at what one request carries
 * (a barrier write: 11 direct segments), each given pages if none wait;
 * a write's data copied in, or kept aside until its pages come.  With
 * q->lock held (let go while the data is copied); 0 or -errno.
 */
static int build_rw(struct xbdf_queue *q, struct xbdf_io *io, const struct xbd_front_req *req,
		    const struct snap *sn, struct build *b)
{
	bool write = req->op == XBD_FRONT_WRITE;
	bool fua = write && (req->flags & XBD_FRONT_FUA);
	bool barrier = fua && !sn->flush && sn->barrier;
	/* a barrier write carries its data and so cannot be indirect */
	unsigned int segs = barrier ? BLKIF_MAX_SEGMENTS_PER_REQUEST : sn->max_segs;
	uint64_t chunk = (uint64_t)segs * XBD_PAGE_SIZE, off;
	uint8_t op = barrier ? BLKIF_OP_WRITE_BARRIER : write ? BLKIF_OP_WRITE : BLKIF_OP_READ;
	/* pages only while nobody waits for some: they are handed out in order */
	bool take = !wait_has_nopages(q);
	struct xbdf_shadow *w;
	int rc;

	if (fua && sn->flush)
		io->flush_after = true;
	for (off = 0; off < req->len; off += chunk) {
		uint64_t n = req->len - off < chunk ? req->len - off : chunk;
		struct xbdf_shadow *s = shadow_new(io, op, (req->offset + off) >> XBD_SECTOR_SHIFT);

		if (!s)
			return -ENOMEM;
		build_add(b, s);
		rc = shadow_pages(q, s, (uint32_t)n,
				  n > (uint64_t)BLKIF_MAX_SEGMENTS_PER_REQUEST * XBD_PAGE_SIZE, take);
		if (rc < 0)
			return rc;
		/* once one part waits for pages, the later ones wait behind it */
		if (s->nopages)
			take = false;
		s->data_off = off;
	}
	if (!write)
		return 0;
	/* the shadows are still private: copy without holding up the queue */
	pthread_mutex_unlock(&q->lock);
	for (w = b->head; w; w = w->next) {
		if (!w->nopages) {
			xbdf_copy_pages(w, false);
			continue;
		}
		/* no pages yet: keep a copy until it gets them */
		w->wbuf = malloc(w->len);
		if (!w->wbuf) {
			pthread_mutex_lock(&q->lock);
			return -ENOMEM;
		}
		xbdf_iov_copy(io, w->data_off, w->wbuf, w->len, false);
	}
	pthread_mutex_lock(&q->lock);
	return 0;
}

/* The request as its shadows into b (q->lock held): 0 or -errno. */
static int build_req(struct xbdf_queue *q, struct xbdf_io *io, const struct xbd_front_req *req,
		     const struct snap *sn, uint8_t fop, struct build *b)
{
	struct xbdf_shadow *s;

	if (req->op != XBD_FRONT_FLUSH && req->op != XBD_FRONT_DISCARD)
		return build_rw(q, io, req, sn, b);
	if (req->op == XBD_FRONT_FLUSH)
		s = shadow_new(io, fop, 0);
	else
		s = shadow_new(io, BLKIF_OP_DISCARD, req->offset >> XBD_SECTOR_SHIFT);
	if (!s)
		return -ENOMEM;
	if (req->op == XBD_FRONT_DISCARD) {
		s->nr_sectors = req->len >> XBD_SECTOR_SHIFT;
		s->discard_flags = (req->flags & XBD_FRONT_SECURE) ? BLKIF_DISCARD_SECURE : 0;
	}
	build_add(b, s);
	return 0;
}

int xbd_front_submit(struct xbd_front *f, const struct xbd_front_req *req)
{
	struct build b = { 0 };
	struct xbdf_queue *q;
	struct xbdf_io *io;
	struct snap sn;
	unsigned int qi;
	uint8_t fop;
	int rc;

	take_snap(f, &sn);
	if (sn.broken)
		return sn.broken;
	rc = check_req(&sn, req);
	if (rc < 0)
		return rc;
	if (req->queue >= 0 && (unsigned int)req->queue >= sn.nr_queues)
		return -EINVAL;
	fop = flush_sent_as(&sn, req);
	if ((req->op == XBD_FRONT_FLUSH && !fop) ||
	    ((req->op == XBD_FRONT_READ || req->op == XBD_FRONT_WRITE || req->op == XBD_FRONT_DISCARD) &&
	     req->len == 0)) {
		/* nothing to send: a backend without flush support writes through */
		atomic_fetch_add(&f->inflight, 1);
		io = io_new(f, req, 0);
		if (!io) {
			atomic_fetch_sub(&f->inflight, 1);
			return -ENOMEM;
		}
		complete_io(io, 0);
		return 0;
	}

	qi = req->queue >= 0 ? (unsigned int)req->queue
			     : atomic_fetch_add(&f->next_queue, 1) % sn.nr_queues;
	q = &f->queues[qi];
	io = io_new(f, req, (int)qi);
	if (!io)
		return -ENOMEM;
	pthread_mutex_lock(&q->lock);
	rc = build_req(q, io, req, &sn, fop, &b);
	if (rc)
		goto fail;
	io->parts = b.n;
	atomic_fetch_add(&f->inflight, 1);
	wait_insert_build(q, &b);
	xbdf_queue_kick(q);
	pthread_mutex_unlock(&q->lock);
	return 0;
fail:
	build_free(q, &b);
	/* pages given back may be what a waiting request needs */
	xbdf_queue_kick(q);
	pthread_mutex_unlock(&q->lock);
	free(io);
	return rc;
}

/* Map a response status to the result of a shadow; drops refused features. */
static int shadow_result(struct xbd_front *f, const struct xbdf_shadow *s, int16_t status)
{
	if (status == BLKIF_RSP_OKAY)
		return 0;
	/* Linux: an empty flush or barrier that failed means "not supported" */
	if (status == BLKIF_RSP_ERROR && s->nr_segs == 0 &&
	    (s->op == BLKIF_OP_FLUSH_DISKCACHE || s->op == BLKIF_OP_WRITE_BARRIER))
		status = BLKIF_RSP_EOPNOTSUPP;
	if (status == BLKIF_RSP_EOPNOTSUPP) {
		pthread_mutex_lock(&f->lock);
		if (s->op == BLKIF_OP_FLUSH_DISKCACHE || s->op == BLKIF_OP_WRITE_BARRIER) {
			f->info.flush = false;
			f->info.barrier = false;
		} else if (s->op == BLKIF_OP_DISCARD) {
			f->info.discard = false;
			f->info.discard_secure = false;
		}
		pthread_mutex_unlock(&f->lock);
		return -EOPNOTSUPP;
	}
	return -EIO;
}

/* Finish shadows taken off the ring: data out, pages back, parts done. */
static int finish_shadows(struct xbdf_queue *q, struct xbdf_shadow *done)
{
	struct xbdf_shadow *s, *next;
	int n = 0;

	for (s = done; s; s = s->next)
		if (s->op == BLKIF_OP_READ && s->io && s->result == 0)
			xbdf_copy_pages(s, true);
	pthread_mutex_lock(&q->lock);
	for (s = done; s; s = s->next)
		xbdf_pages_put(q, s);
	/* pages and slots just came back: whatever waits may go now */
	if (done)
		xbdf_queue_kick(q);
	pthread_mutex_unlock(&q->lock);
	for (s = done; s; s = next) {
		next = s->next;
		io_part_done(s->io, s->result);
		shadow_free(s);
		n++;
	}
	return n;
}

/* Unlink *pp from q's wait list (prev is the entry before it, or NULL). */
static struct xbdf_shadow *wait_unlink(struct xbdf_queue *q, struct xbdf_shadow **pp,
				       struct xbdf_shadow *prev)
{
	struct xbdf_shadow *s = *pp;

	*pp = s->next;
	if (q->wait_tail == s)
		q->wait_tail = prev;
	s->next = NULL;
	return s;
}

/*
 * q->lock held: cut a waiting read/write shadow into pieces of at most
 * max_segs segments, in place in the wait list (Linux blkfront re-splits
 * what it resubmits the same way).  Returns the last piece.
 */
static struct xbdf_shadow *shadow_split(struct xbdf_queue *q, struct xbdf_shadow *s,
					unsigned int max_segs)
{
	uint32_t chunk = max_segs * XBD_PAGE_SIZE, off;
	struct build b = { 0 };
	struct xbdf_shadow *last;

	for (off = 0; off < s->len; off += chunk) {
		uint32_t n = s->len - off < chunk ? s->len - off : chunk;
		struct xbdf_shadow *ns = shadow_new(s->io, s->op, s->sector + (off >> XBD_SECTOR_SHIFT));
		unsigned int j;

		if (!ns)
			goto fail;
		build_add(&b, ns);
		/* no pages here: shadows in front of it may be waiting for some */
		if (shadow_pages(q, ns, n, n > BLKIF_MAX_SEGMENTS_PER_REQUEST * XBD_PAGE_SIZE,
				 false) < 0)
			goto fail;
		ns->data_off = s->data_off + off;
		if (s->op != BLKIF_OP_READ && ns->nopages) {
			ns->wbuf = malloc(n);
			if (!ns->wbuf)
				goto fail;
			xbdf_shadow_data_out(s, off, ns->wbuf, n);
		} else if (s->op != BLKIF_OP_READ) {
			for (j = 0; j < ns->nr_segs; j++) {
				uint32_t m = n - j * XBD_PAGE_SIZE;

				xbdf_shadow_data_out(s, off + j * XBD_PAGE_SIZE, ns->pages[j].addr,
						m < XBD_PAGE_SIZE ? m : XBD_PAGE_SIZE);
			}
		}
	}
	s->io->parts += b.n - 1;
	b.tail->next = s->next;
	if (q->wait_tail == s)
		q->wait_tail = b.tail;
	last = b.tail;
	/* the caller links b.head where s was */
	s->next = b.head;
	return last;
fail:
	build_free(q, &b);
	return NULL; /* left whole: the backend will refuse it and the caller sees an error */
}

/*
 * q->lock held, after a (re)connect: make the waiting shadows fit what
 * the backend offers now (it may have restarted with other features):
 * flushes take the current flush op or complete at once, barrier writes
 * become write + flush, discards fail when discard went away, and reads
 * and writes longer than the new segment limit are split.  Shadows that
 * complete here are returned; the caller finishes them without the lock.
 */
struct xbdf_shadow *xbdf_queue_refit(struct xbdf_queue *q)
{
	struct xbd_front *f = q->f;
	struct xbdf_shadow **pp = &q->wait_head, *s, *prev = NULL, *done = NULL, **dtail = &done;
	uint8_t fop = flush_op(f);

	while ((s = *pp)) {
		int result = 1; /* 1: keep waiting */

		if ((s->op == BLKIF_OP_FLUSH_DISKCACHE || s->op == BLKIF_OP_WRITE_BARRIER) &&
		    s->nr_segs == 0) {
			if (fop)
				s->op = fop;
			else
				result = 0;
		} else if (s->op == BLKIF_OP_WRITE_BARRIER && !f->info.barrier) {
			s->op = BLKIF_OP_WRITE;
			if (f->info.flush)
				s->io->flush_after = true;
		} else if (s->op == BLKIF_OP_DISCARD && !f->info.discard) {
			result = -EOPNOTSUPP;
		}
		if (result != 1) {
			s = wait_unlink(q, pp, prev);
			s->result = result;
			*dtail = s;
			dtail = &s->next;
			continue;
		}
		if ((s->op == BLKIF_OP_READ || s->op == BLKIF_OP_WRITE ||
		     s->op == BLKIF_OP_WRITE_BARRIER) &&
		    s->nr_segs > (s->op == BLKIF_OP_WRITE_BARRIER ? BLKIF_MAX_SEGMENTS_PER_REQUEST
								 : f->info.max_segs)) {
			struct xbdf_shadow *last = shadow_split(q, s,
				s->op == BLKIF_OP_WRITE_BARRIER ? BLKIF_MAX_SEGMENTS_PER_REQUEST
								: f->info.max_segs);

			if (last) {
				*pp = s->next;
				xbdf_pages_put(q, s);
				shadow_free(s);
				prev = last;
				pp = &last->next;
				continue;
			}
		}
		prev = s;
		pp = &s->next;
	}
	return done;
}

void xbdf_queue_finish(struct xbdf_queue *q, struct xbdf_shadow *done)
{
	finish_shadows(q, done);
}

int xbdf_queue_reap(struct xbdf_queue *q)
{
	struct xbd_front *f = q->f;
	struct xbd_response rsp[32];
	struct xbdf_shadow *done = NULL, **tail = &done;
	const char *bad = NULL;
	int port, n, i, total = 0;

	pthread_mutex_lock(&q->lock);
	while ((port = xbd_evtchn_pending(q->evt)) >= 0)
		xbd_evtchn_unmask(q->evt, (uint32_t)port);
	while (q->failed) {
		struct xbdf_shadow *s = q->failed;

		q->failed = s->next;
		s->next = NULL;
		*tail = s;
		tail = &s->next;
	}
	if (!q->sring) {
		pthread_mutex_unlock(&q->lock);
		return finish_shadows(q, done);
	}
	for (;;) {
		n = xring_front_consume(&q->ring, rsp, 32);
		if (n < 0) {
			bad = "response producer index runs past the requests pushed";
			break;
		}
		if (n == 0) {
			if (!xring_front_final_check(&q->ring))
				break;
			continue;
		}
		for (i = 0; i < n; i++) {
			struct xbdf_shadow *s;
			uint8_t want;

			if (rsp[i].id >= q->nr_slots || !q->slot[rsp[i].id]) {
				bad = "response with an unknown or duplicate id";
				break;
			}
			s = q->slot[rsp[i].id];
			want = s->op;
			if (rsp[i].operation != want &&
			    !(s->indirect && rsp[i].operation == BLKIF_OP_INDIRECT)) {
				bad = "response with the wrong operation";
				break;
			}
			q->slot[rsp[i].id] = NULL;
			q->free_ids[q->nr_free++] = (unsigned int)rsp[i].id;
			s->result = shadow_result(f, s, rsp[i].status);
			s->next = NULL;
			*tail = s;
			tail = &s->next;
			STAT_ADD(f, responses, 1);
		}
		if (bad)
			break;
	}
	if (!bad)
		xbdf_queue_kick(q);
	pthread_mutex_unlock(&q->lock);
	total = finish_shadows(q, done);
	if (bad) {
		xbd_front_set_broken(f, -EPROTO, bad);
		return -EPROTO;
	}
	return total;
}

/*
 * q->lock held: take every shadow the backend has not answered off the
 * ring (for a reconnect) and append it to head/tail, ids freed.
 */
void xbdf_queue_requeue_inflight(struct xbdf_queue *q, struct xbdf_shadow **head,
				 struct xbdf_shadow **tail)
{
	unsigned int id;

	for (id = 0; id < q->nr_slots; id++) {
		struct xbdf_shadow *s = q->slot[id];

		if (!s)
			continue;
		q->slot[id] = NULL;
		s->next = NULL;
		if (*tail)
			(*tail)->next = s;
		else
			*head = s;
		*tail = s;
		STAT_ADD(q->f, resubmitted, 1);
	}
	q->nr_free = 0;
	for (id = 0; id < q->nr_slots; id++)
		q->free_ids[q->nr_free++] = q->nr_slots - 1 - id;
}

/* Event thread: fail every request in flight or waiting with err. */
void xbd_front_fail_all(struct xbd_front *f, int err)
{
	unsigned int i, id;

	for (i = 0; i < f->nr_queues_alloc; i++) {
		struct xbdf_queue *q = &f->queues[i];
		struct xbdf_shadow *list = NULL, *s;

		pthread_mutex_lock(&q->lock);
		for (id = 0; id < q->nr_slots; id++) {
			if ((s = q->slot[id])) {
				q->slot[id] = NULL;
				q->free_ids[q->nr_free++] = id;
				s->next = list;
				list = s;
			}
		}
		while ((s = q->wait_head)) {
			q->wait_head = s->next;
			s->next = list;
			list = s;
		}
		q->wait_tail = NULL;
		while ((s = q->failed)) {
			q->failed = s->next;
			s->next = list;
			list = s;
		}
		for (s = list; s; s = s->next) {
			xbdf_pages_put(q, s);
			s->result = err;
		}
		pthread_mutex_unlock(&q->lock);
		while ((s = list)) {
			list = s->next;
			io_part_done(s->io, err);
			shadow_free(s);
		}
	}
}

/*
 * The device cannot go on (a ring the backend corrupted, xenstore lost, the
 * device removed): the first cause is kept, said once, and every request fails.
 */
void xbd_front_set_broken(struct xbd_front *f, int err, const char *why)
{
	pthread_mutex_lock(&f->lock);
	if (!f->broken) {
		f->broken = err;
		f->error = why;
	}
	pthread_mutex_unlock(&f->lock);
	if (why)
		fprintf(stderr, "xbd-front: vbd %u/%u: %s: disconnecting\n", f->info.domid,
			f->info.devid, why);
	xbd_front_fail_all(f, err);
}

const char *xbd_front_op_name(enum xbd_front_op op)
{
	switch (op) {
	case XBD_FRONT_READ: return "read";
	case XBD_FRONT_WRITE: return "write";
	case XBD_FRONT_FLUSH: return "flush";
	case XBD_FRONT_DISCARD: return "discard";
	}
	return "unknown";
}
