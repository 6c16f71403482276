/*
 * ring-round.c: one round of a ring served here (ring-thread.h): consume
 * in named steps (take, check, grants, queue) with each request copied
 * out of the shared ring once and validated completely, submission to the
 * engine (behind the disk's I/O limits), a request's engine steps
 * (step_next), completions reaped in batches, and the push with
 * notification suppression.
 *
 * Nothing a frontend writes is trusted: ring indexes are checked by the
 * ring library (-EPROTO: this ring stops and the device is disconnected),
 * each request by xbd_req_validate (a bad one gets BLKIF_RSP_ERROR or
 * BLKIF_RSP_EOPNOTSUPP and a rate-limited log line), and every grant by the
 * hypervisor (a failure fails only the requests that used it).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/datapath/ring-thread.h"
#include "blkback/datapath/throttle.h"

#define REAP_MAX 64

/*
 * Largest io_submit batch on storage that completes inside io_submit
 * (ring_submit): half the default max-batch, so that a consumed batch
 * of a queue-depth-32 guest is answered in two halves.  Measured on tmpfs,
 * 4k random reads at QD32: 370-395k IOPS answering whole batches,
 * 600-670k with chunks of 8 to 16.
 */
#define BK_SYNC_CHUNK 16


/* Fill the request's engine operation. */
static void prep_io(struct xbd_bring *br, struct bk_req *req)
{
	struct xbd_io *io = &req->io;
	enum xbd_cache_mode cache = br->base.disk->o.cache;
	bool durable = false;

	memset(io, 0, offsetof(struct xbd_io, priv));
	io->opaque = req;
	io->offset = req->r.sector_number << XBD_SECTOR_SHIFT;
	io->iov = req->iov;
	io->iovcnt = req->r.nr_segments;
	switch (req->r.operation) {
	case BLKIF_OP_READ:
		io->op = XBD_IO_READ;
		break;
	case BLKIF_OP_WRITE:
		io->op = XBD_IO_WRITE;
		durable = cache == XBD_CACHE_WRITETHROUGH;
		break;
	case BLKIF_OP_WRITE_BARRIER:
		/* The write half of a barrier: durable on completion (the FUA lesson). */
		io->op = XBD_IO_WRITE;
		durable = cache != XBD_CACHE_UNSAFE;
		break;
	case BLKIF_OP_FLUSH_DISKCACHE:
		io->op = XBD_IO_FLUSH;
		break;
	case BLKIF_OP_DISCARD:
		io->op = XBD_IO_DISCARD;
		io->len = req->r.nr_sectors << XBD_SECTOR_SHIFT;
		io->secure = (req->r.discard_flags & BLKIF_DISCARD_SECURE) &&
			     br->lim.discard_secure;
		break;
	}
	/* RWF_DSYNC, or (fua-mode fdatasync) a flush once the write completed. */
	req->step = BK_STEP_OP;
	if (durable && br->base.disk->o.fua_mode == XBD_FUA_FDATASYNC)
		req->step = BK_STEP_OP_SYNC;
	else
		io->dsync = durable;
}

/*
 * consume, step 1 (take): requests into this round's batch, those the
 * journal had taken first (after a restart, in their order), then the
 * ring's, until the batch's arrays are full, the grant-copy pool or the
 * retired mappings run short, no slot is free, or a barrier was taken;
 * each taken from the ring is in the journal before anything else.  How
 * many; a corrupt ring with nothing taken: -errno.
 */
static int take_batch(struct xbd_bring *br, int pending)
{
	struct bk_req **batch = br->batch;
	unsigned int nb = 0, segs = 0, pages = 0;
	bool taken = false;

	while ((pending > 0 || br->redo_head) && !br->barrier) {
		struct bk_req *req;

		/* The batch arrays are full: the rest is the next round's batch. */
		if (segs + br->segmax + XBD_MAX_INDIRECT_PAGES > BK_BATCH_SEGS)
			break;
		/* Too many evicted mappings wait out the grace: until they are unmapped. */
		if (grant_retire_full(br)) {
			XBD_STAT_INC(br->base.stats, oo_req);
			br->starved = true;
			break;
		}
		/*
		 * Grant copy: out of bounce pages until requests complete.  The
		 * guest's requests wait in its ring (Linux blkback does the same).
		 */
		if (br->bpool && pages + br->segmax > br->bpool_nfree) {
			XBD_STAT_INC(br->base.stats, oo_req);
			br->starved = true;
			break;
		}
		bool redone = br->redo_head;

		if (redone) {
			req = br->redo_head;
		} else {
			int n;

			/* Consumed into the free list's head, which leaves the list only if a request came. */
			req = br->free;
			if (!req) {
				XBD_STAT_INC(br->base.stats, oo_req);
				break;
			}
			n = xring_back_consume(&br->ring, &req->r, 1);
			if (n <= 0) {
				if (n < 0 && !nb)
					return n;
				break;
			}
			taken = true;
			pending--;
		}
		req_move(br, req, BK_TAKEN);
		req->redone = redone;
		batch[nb++] = req;
		/* Upper bounds: validation refuses anything larger later. */
		{
			unsigned int ns = req->r.nr_segments < br->segmax ? req->r.nr_segments
									    : br->segmax;

			segs += ns + (req->r.nr_indirect_pages < XBD_MAX_INDIRECT_PAGES
				      ? req->r.nr_indirect_pages : XBD_MAX_INDIRECT_PAGES);
			pages += ns;
		}
		/* Nothing after a barrier may start before it completes. */
		if (req->r.raw_operation == BLKIF_OP_WRITE_BARRIER)
			break;
		if (!pending && !br->redo_head) {
			pending = xring_back_pending(&br->ring);
			if (pending < 0)
				break; /* answer this batch; the next call reports it */
		}
	}
	if (br->jr && taken) {
		xbd_journal_consumed(br->jr, br->ring.req_cons);
		CRASH_POINT(br, "consumed");
	}
	/* In flight from now, not from the push (a reader would see a busy ring idle). */
	if (taken)
		ring_count_in_flight(br);
	return (int)nb;
}

/*
 * consume, step 2 (check): indirect headers, then their pages, then full
 * validation; what fails is req_answered (req_reject), what passes is
 * counted and carries the batch's consume time t.
 */
static void check_batch(struct xbd_bring *br, struct bk_req **batch, unsigned int nb, uint64_t t)
{
	unsigned int i;

	for (i = 0; i < nb; i++) {
		enum xbd_req_error e = xbd_req_check_indirect(&batch[i]->r, &br->lim);

		if (e) {
			req_reject(br, batch[i], e);
		}
	}
	grants_load_indirect(br, batch, nb);
	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];
		enum xbd_req_error e;

		if (req_answered(req))
			continue;
		e = xbd_req_validate(&req->r, &br->lim);
		if (e) {
			req_reject(br, req, e);
			continue;
		}
		req->consumed_ns = t;
		/*
		 * Its answer is counted; its acceptance was, by the dead worker
		 * (unless it died between the journal's consumed and here: then
		 * never; in_flight, from the ring's indexes, is exact either way).
		 */
		if (req->redone && br->base.p.redo_counted)
			continue;
		switch (req->r.operation) {
		case BLKIF_OP_READ:
			XBD_STAT_INC(br->base.stats, rd_req);
			XBD_STAT_ADD(br->base.stats, rd_sect, req->r.nr_sectors);
			break;
		case BLKIF_OP_WRITE:
			XBD_STAT_INC(br->base.stats, wr_req);
			XBD_STAT_ADD(br->base.stats, wr_sect, req->r.nr_sectors);
			break;
		case BLKIF_OP_WRITE_BARRIER:
			XBD_STAT_INC(br->base.stats, barrier_req);
			XBD_STAT_ADD(br->base.stats, wr_sect, req->r.nr_sectors);
			break;
		case BLKIF_OP_FLUSH_DISKCACHE:
			XBD_STAT_INC(br->base.stats, f_req);
			break;
		case BLKIF_OP_DISCARD:
			XBD_STAT_INC(br->base.stats, ds_req);
			break;
		}
	}
}

/*
 * consume, step 4 (queue): each request still unanswered prepared for the
 * engine and queued for submit, but a barrier, which waits for what is in
 * flight (br->barrier), and a flush the cache mode makes moot, answered.
 */
static void queue_batch(struct xbd_bring *br, struct bk_req **batch, unsigned int nb)
{
	for (unsigned int i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];

		if (req_answered(req))
			continue;
		prep_io(br, req);
		if (req->r.operation == BLKIF_OP_WRITE_BARRIER) {
			req_move(br, req, BK_DRAINING);
			if (br->inflight || br->submit_head)
				CRASH_POINT(br, "drain"); /* earlier requests still in flight */
			continue;
		}
		if (req->r.operation == BLKIF_OP_FLUSH_DISKCACHE &&
		    br->base.disk->o.cache != XBD_CACHE_WRITEBACK) {
			/* unsafe: nothing to honour; writethrough: every write is durable already. */
			req_finish(br, req, BLKIF_RSP_OKAY);
			continue;
		}
		req_move(br, req, BK_QUEUED);
	}
}

/*
 * One round of the ring: take a batch, check it, get its grants, queue
 * it (the steps above; a request refused at a step is answered there and
 * passed by at the next).  How many requests were taken, or -errno.
 */
int ring_consume(struct xbd_bring *br)
{
	uint64_t t;
	int pending, nb;

	br->starved = false;
	/* After a restart, what the journal had taken goes first, in its order. */
	pending = br->redo_head ? 0 : xring_back_pending(&br->ring);
	if (pending < 0 || (!pending && !br->redo_head))
		return pending;
	/* The batch's consume time, for the latency histograms (the wake-up's, if one was read). */
	if (!br->turn_ns)
		br->turn_ns = ring_now(br);
	t = br->turn_ns;
	/* What completes from now on was submitted after it: a reap reads the clock anew. */
	br->turn_woke = false;
	nb = take_batch(br, pending);
	if (nb < 0)
		return nb;
	check_batch(br, br->batch, (unsigned int)nb, t);
	grants_batch(br, br->batch, (unsigned int)nb);
	queue_batch(br, br->batch, (unsigned int)nb);
	return nb;
}

/* ---- submission and completion ---- */

static void io_failed(struct xbd_bring *br, struct bk_req *req, int err)
{
	XBD_STAT_INC(br->base.stats, io_errors);
	xbd_log_limited(&br->base.disk->rl, XBD_LOG_WARNING, "%s: I/O error on op %u sector %" PRIu64 ": %s",
			br->base.name, req->r.operation, req->r.sector_number, strerror(-err));
}


/*
 * Whether the disk's I/O limits (throttle.h) let req go to the engine
 * now.  Its cost is taken once, however many engine operations it takes
 * (a barrier's flush and write, a write and its fdatasync).  When not,
 * the ring notes when to try again; the request stays at the head of the
 * submit queue, and everything behind it waits too (order is kept).  A
 * stopping ring is not held back (what it consumed is answered at once),
 * but what it lets go still counts: reconnecting buys no free I/O.
 * *now is the submission's clock read, made by the first request that
 * needs it (0: not yet): one per batch, not one per request, which on a
 * PV dom0 is a system call.
 */
static bool throttle_pass(struct xbd_bring *br, struct bk_req *req, uint64_t *now)
{
	struct xbd_throttle *t = __atomic_load_n(&br->base.disk->thr, __ATOMIC_ACQUIRE);
	enum xbd_throttle_op op = XBD_THR_OTHER_WRITE;
	uint64_t bytes = 0, due;

	if (!t || req->thr_paid || !xbd_throttle_active(t))
		return true;
	if (req->r.operation == BLKIF_OP_READ || req->r.operation == BLKIF_OP_WRITE ||
	    req->r.operation == BLKIF_OP_WRITE_BARRIER) {
		op = req->r.operation == BLKIF_OP_READ ? XBD_THR_READ : XBD_THR_WRITE;
		bytes = (uint64_t)req->r.nr_sectors << XBD_SECTOR_SHIFT;
	}
	if (!*now)
		*now = ring_now(br);
	if (!xbd_throttle_take(t, op, bytes, br->base.stop, *now, &due)) {
		if (!req->thr_since)
			req->thr_since = *now;
		br->throttled = true;
		br->throttle_due = due;
		return false;
	}
	req->thr_paid = true;
	if (req->thr_since) {
		XBD_STAT_INC(br->base.stats, throttled);
		XBD_STAT_ADD(br->base.stats, throttle_ns, *now - req->thr_since);
	}
	return true;
}

/*
 * A write or discard about to go to the engine, when its disk has
 * changed-block tracking: counted and marked (cbt.c), and its io turned
 * into the read of the blocks its disk's view still needs (cbw.c) when
 * there are some.  False: a checkpoint's drained section holds it back.
 * A copy's read that was not taken by the engine comes back here as it is.
 */
static bool track_pass(struct xbd_bring *br, struct bk_req *req, uint64_t *now)
{
	if (!br->cbt || req->step == BK_STEP_CBW ||
	    (req->io.op != XBD_IO_WRITE && req->io.op != XBD_IO_DISCARD))
		return true;
	if (!cbt_admit(br, req, now))
		return false;
	cbt_mark(br, req);
	cbw_check(br, req);
	return true;
}

/*
 * Hand queued requests to the engine: reads and writes in io_submit
 * batches of up to max-batch.  Storage that completes inside io_submit
 * (tmpfs, the page cache, the null engine: br->sync_io) would otherwise
 * make the frontend and this thread take turns, each idle while the
 * other works through a whole batch; there the batches are capped at
 * BK_SYNC_CHUNK and what completed is answered before the next one is
 * submitted, so the frontend refills the ring while we work.
 */
void ring_submit(struct xbd_bring *br)
{
	const struct xbd_engine *eng = br->base.disk->eng;
	/* xbdctl may change it at any time (control.c). */
	unsigned int max = __atomic_load_n(&br->base.disk->o.max_batch, __ATOMIC_RELAXED);
	uint64_t now = 0; /* the limits' clock read (throttle_pass) */

	br->throttled = false;
	/* The disk's tracking, published with release when it is attached at run time. */
	br->cbt = __atomic_load_n(&br->base.disk->cbt, __ATOMIC_ACQUIRE);
	while (br->submit_head) {
		struct bk_req *req = br->submit_head;
		struct xbd_io **ios = br->ios;
		/* max == 0 (engine default) submits at most 64 per call. */
		unsigned int n = 0, lim = max ? max : 64;
		int ret;

		if (br->inflight >= br->depth) {
			/* The engine's depth is used up: the rest waits for completions. */
			XBD_STAT_INC(br->base.stats, oo_req);
			return;
		}
		if (lim > br->depth - br->inflight)
			lim = br->depth - br->inflight;
		if (lim > br->nslots)
			lim = br->nslots;
		if (br->sync_io && lim > BK_SYNC_CHUNK)
			lim = BK_SYNC_CHUNK;
		if (req->io.op == XBD_IO_FLUSH || req->io.op == XBD_IO_DISCARD) {
			if (!throttle_pass(br, req, &now) || !track_pass(br, req, &now)) {
				cbt_flush(br);
				return;
			}
			cbt_flush(br);
			/* Its view's blocks first: the copy's read goes through submit. */
			ret = req->io.op == XBD_IO_READ ? eng->submit(br->q, (struct xbd_io *[]){ &req->io }, 1)
			      : req->io.op == XBD_IO_FLUSH ? eng->flush(br->q, &req->io)
							   : eng->discard(br->q, &req->io);
			if (req->io.op == XBD_IO_READ && ret == 0)
				ret = -EAGAIN;
			else if (req->io.op == XBD_IO_READ && ret > 0)
				ret = 0;
			if (ret == -EAGAIN)
				return;
			if (ret < 0)
				req_complete(br, req, ret);
			else
				req_move(br, req, BK_INFLIGHT);
			continue;
		}
		for (; req && n < lim && (req->io.op == XBD_IO_READ || req->io.op == XBD_IO_WRITE);
		     req = req->next) {
			if (!throttle_pass(br, req, &now) || !track_pass(br, req, &now))
				break;
			ios[n++] = &req->io;
		}
		/* What was marked is durable enough before the engine sees it (cbt.c). */
		cbt_flush(br);
		if (!n)
			return; /* the limits hold the head back (br->throttled) */
		ret = eng->submit(br->q, ios, n);
		if (ret == -EAGAIN || ret == 0)
			return; /* the kernel is full: retry after reaping */
		if (ret < 0) {
			/* The first iocb was refused: fail it alone and go on. */
			req_complete(br, br->submit_head, ret);
			continue;
		}
		xbd_stats_batch(br->base.stats, ret);
		while (ret--)
			req_move(br, br->submit_head, BK_INFLIGHT);
		/* Completions already there: the storage works inside io_submit. */
		br->sync_io = eng->queue_ready && eng->queue_ready(br->q);
		if (br->sync_io && br->submit_head && ring_reap(br))
			ring_push(br);
	}
}

/*
 * The request's next engine operation, now that its current one (its
 * step, or a barrier's drain) succeeded: true when it has one (req->step
 * and req->io say which), false when it is done.  ring-thread.h's enum
 * bk_req_step says in what order.
 */
static bool step_next(struct xbd_bring *br, struct bk_req *req)
{
	enum bk_req_step step = req->step;

	if (req->state == BK_DRAINING) {
		/* Everything before the barrier has completed: its pre-flush. */
		if (br->base.disk->o.cache != XBD_CACHE_UNSAFE) {
			req->step = BK_STEP_PREFLUSH;
			req->io.op = XBD_IO_FLUSH;
			return true;
		}
		step = BK_STEP_PREFLUSH; /* unsafe: as if it were done */
	}
	switch (step) {
	case BK_STEP_PREFLUSH:
		/* The barrier's write, durable on completion (the FUA lesson). */
		if (!req->r.nr_segments)
			return false;
		prep_io(br, req);
		return true;
	case BK_STEP_OP_SYNC:
		/* The durable write's second half. */
		req->step = BK_STEP_SYNC;
		req->io.op = XBD_IO_FLUSH;
		return true;
	case BK_STEP_OP:
	case BK_STEP_SYNC:
	default:
		return false;
	}
}

/*
 * The request's current operation completed with result (or, for a
 * barrier, its drain did): on to its next, or it is finished (answered
 * now, or once its grants are unmapped or its data copied out).
 */
void req_complete(struct xbd_bring *br, struct bk_req *req, int result)
{
	if (req->step == BK_STEP_CBW) {
		/* The view's copy, made or failed (the view's, never the guest's): now its own op. */
		cbw_done(br, req, result);
		prep_io(br, req);
		req_move(br, req, BK_QUEUED);
		return;
	}
	if (!result && step_next(br, req)) {
		req_move(br, req, BK_QUEUED);
		return;
	}
	if (result) {
		io_failed(br, req, result);
		req_finish(br, req, req->r.operation == BLKIF_OP_DISCARD && result == -EOPNOTSUPP
				   ? BLKIF_RSP_EOPNOTSUPP : BLKIF_RSP_ERROR);
		return;
	}
	if (req->bounce && req->r.operation == BLKIF_OP_READ) {
		req_move(br, req, BK_COPYOUT);
		return;
	}
	req_finish(br, req, BLKIF_RSP_OKAY);
}

/* Collect completions in batches. */
unsigned int ring_reap(struct xbd_bring *br)
{
	struct xbd_io *done[REAP_MAX];
	unsigned int total = 0;
	int n, i;

	do {
		n = br->base.disk->eng->reap(br->q, done, REAP_MAX);
		XBD_STAT_INC(br->base.stats, reap_calls);
		if (n <= 0)
			break;
		XBD_STAT_ADD(br->base.stats, reaped, n);
		if (!total) {
			/* The wake-up's time only for what completed before it woke us. */
			if (!br->turn_ns || !br->turn_woke)
				br->turn_ns = ring_now(br);
			br->last_done_ns = br->turn_ns;
		}
		total += n;
		for (i = 0; i < n; i++)
			req_complete(br, done[i]->opaque, done[i]->result);
	} while (n == REAP_MAX);
	grants_copy_out(br);
	return total;
}

/*
 * The in_flight gauge (stats.h) from the ring's indexes, as the journal
 * has them: taken (consumed) and not answered by a pushed response; set
 * where requests are taken and where answers are pushed.  A successor on
 * a dead worker's counters sets it at its start, whatever the dead one
 * had counted.
 */
void ring_count_in_flight(struct xbd_bring *br)
{
	__atomic_store_n(&br->base.stats->in_flight, (uint32_t)(br->ring.req_cons - br->ring.prod_pushed),
			 __ATOMIC_RELAXED);
}

/* Publish the written responses (journal.h, steps 6 to 9) and free their slots. */
void ring_push(struct xbd_bring *br)
{
	uint32_t prod = br->ring.rsp_prod_pvt;
	bool fresh = prod != br->ring.prod_pushed, notify;
	/* Stamped with the turn's latest clock read: a completion seen, or the consume. */
	uint64_t t = !br->lat.n ? 0 : br->turn_ns ? br->turn_ns : ring_now(br);
	struct bk_req *req;

	if (br->jr && fresh)
		xbd_journal_pushing(br->jr, prod);
	notify = xring_back_push(&br->ring);
	if (br->jr && fresh) {
		xbd_journal_pushed(br->jr, prod);
		CRASH_POINT(br, "pushed"); /* the guest has the answers; they are not recorded */
	}
	while ((req = br->answered_head))
		req_move(br, req, BK_FREE);
	ring_count_in_flight(br);
	if (notify) {
		XBD_STAT_INC(br->base.stats, notify_sent);
		xbd_evtchn_notify(br->evtchn, br->port);
	}
	if (t)
		xbd_lat_record(&br->lat, br->base.stats, t);
	br->turn_ns = 0;
	br->turn_woke = false;
}
