/*
 * ring-thread.c: xbd_ring_here, a ring served by a thread of this process
 * (ring-impl.h's first way): its start (map the shared ring, bind its
 * event channel, allocate, map the journal and take back what it had
 * taken and not answered, open the engine's queue), the thread's loop,
 * and its stop, bounded at SIGTERM, after which every consumed request
 * has been answered.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "blkback/datapath/ring-thread.h"
#include "blkback/datapath/ringcpu.h"
#include "blkback/datapath/throttle.h"

/* Grant copy: bounce pages per ring (Linux blkback's max_buffer_pages, 4 MiB). */
#define BK_BOUNCE_PAGES 1024

/*
 * I/Os a ring keeps in flight in the engine.  An aio context of the
 * ring's full size (513 at order 4, times 16 queues) would let a few
 * guests use up the host's fs.aio-max-nr (65536); requests beyond this
 * wait in the submit queue (counted in oo_req).
 */
#define BK_QUEUE_DEPTH 128

static void *ring_main(void *arg)
{
	struct xbd_bring *br = arg;
	struct xbd_disk *disk = br->base.disk;

	ring_clock_init();
	if (br->base.cpu >= 0) {
		int err = xbd_ringcpu_pin_self(br->base.cpu);

		if (err)
			xbd_log_limited(&disk->crl, XBD_LOG_WARNING, "%s: cannot run on CPU %d: %s",
				br->base.name, br->base.cpu, strerror(-err));
	}

	/*
	 * A daemon killed between publishing responses and notifying left a
	 * frontend waiting for an event that never came: one now is harmless.
	 */
	if (br->base.rep.resumed)
		xbd_evtchn_notify(br->evtchn, br->port);
	/* What the journal says is in flight, whatever a dead worker left counted (stats.h). */
	ring_count_in_flight(br);

	for (;;) {
		bool work = false;

		if (br->base.stop && xbd_ring_life(&br->base) == XBD_RING_RUNNING) {
			unsigned int i;

			xbd_ring_set_life(&br->base, XBD_RING_DRAINING);
			for (i = 0; i < br->nslots; i++)
				br->base.rep.stop_inflight += br->slots[i].state != BK_FREE &&
						     br->slots[i].state != BK_ANSWERED;
			/* Its storage may hang: the control plane does not wait for it. */
			if (br->base.rep.stop_inflight && !disk->host->stopping)
				xbd_log_limited(&disk->crl, XBD_LOG_INFO, "%s: I/O still in flight "
						"(%u requests): releasing the ring once it completes",
						br->base.name, br->base.rep.stop_inflight);
		}
		br->lim.nr_sectors = __atomic_load_n(&disk->lim.nr_sectors, __ATOMIC_RELAXED);
		if (!br->base.stop && !br->base.rep.failed && !br->barrier) {
			int n = ring_consume(br);

			if (n < 0) {
				xbd_log_limited(&disk->crl, XBD_LOG_WARNING, "%s: frontend corrupted the ring (%s), disconnecting",
					br->base.name, strerror(-n));
				xbd_ring_set_failed(&br->base);
				uint64_t one = 1;

				if (write(disk->host->wake_fd, &one, sizeof(one)) < 0) {
					/* Counter already set: main wakes anyway. */
				}
			} else if (n > 0) {
				br->consumed += (unsigned int)n;
				work = true;
			}
		}
		/* A barrier's first step, the drain, is over. */
		if (br->barrier && br->barrier->state == BK_DRAINING && !br->inflight &&
		    !br->submit_head)
			req_complete(br, br->barrier, 0);
		ring_submit(br);
		if (br->inflight && ring_reap(br))
			work = true;
		ring_push(br);
		if (br->retired_head)
			grant_retire_due(br, false);
		if (work)
			continue;
		if ((br->base.stop || br->base.rep.failed) && !br->inflight && !br->submit_head && !br->barrier)
			break;
		if (ring_poll(br))
			continue;
		/* Starved: the requests wait for completions, which wake us. */
		if (!br->base.stop && !br->base.rep.failed && !br->barrier && !br->starved &&
		    xring_back_final_check(&br->ring))
			continue;
		ring_wait(br);
	}
	ring_push(br);
	/* Nothing is in flight: the persistent grants go (after the grace). */
	xbd_ring_set_life(&br->base, XBD_RING_RETIRING);
	grant_cache_clear(br);
	grant_retire_due(br, true);
	/* The main thread releases the ring once it sees this (asynchronous teardown). */
	xbd_ring_set_life(&br->base, XBD_RING_EXITED);
	{
		uint64_t one = 1;

		if (write(disk->host->wake_fd, &one, sizeof(one)) < 0) {
			/* Counter already set: main wakes anyway. */
		}
	}
	return NULL;
}

/* ---- setup and teardown ---- */

/*
 * A ring's slots as it starts: every one FREE (as calloc made them) and
 * on the free list by index, but the n slots of order (oldest first, not
 * skipped) at its head, newest first: moved to the redo list in turn,
 * they leave the oldest at its head.
 */
static void slots_init(struct xbd_bring *br, const bool *skip, const unsigned int *order,
		       unsigned int n)
{
	unsigned int i;

	br->free = br->redo_head = NULL;
	for (i = br->nslots; i-- > 0;) {
		if (skip && skip[i])
			continue;
		br->slots[i].next = br->free;
		br->free = &br->slots[i];
	}
	for (i = 0; i < n; i++) {
		br->slots[order[i]].next = br->free;
		br->free = &br->slots[order[i]];
	}
}

static void ring_release(struct xbd_bring *br)
{
	struct xbd_platform *p = xbd_ring_plat(br);
	unsigned int i;

	grant_cache_clear(br);
	grant_retire_due(br, true);
	if (br->q)
		br->base.disk->eng->queue_close(br->q);
	br->q = NULL;
	if (br->evtchn) {
		if (br->port >= 0)
			xbd_evtchn_unbind(br->evtchn, br->port);
		xbd_evtchn_close(br->evtchn);
	}
	br->evtchn = NULL;
	if (br->base.p.evtchn_fd >= 0)
		close(br->base.p.evtchn_fd); /* never adopted: the start failed before */
	br->base.p.evtchn_fd = -1;
	if (br->sring)
		xbd_gnt_unmap(p, br->sring, br->base.p.nr_pages);
	br->sring = NULL;
	/* Its file is the control plane's, which keeps or removes it. */
	xbd_journal_close(br->jr);
	br->jr = NULL;
	if (br->epfd >= 0)
		close(br->epfd);
	if (br->stop_fd >= 0)
		close(br->stop_fd);
	br->epfd = br->stop_fd = -1;
	if (br->slots) {
		for (i = 0; i < br->nslots; i++)
			free(br->slots[i].ind);
		free(br->slots[0].iov);
	}
	free(br->slots);
	free(br->batch);
	free(br->ios);
	free(br->bpool);
	free(br->bpool_free);
	br->ios = NULL;
	br->bpool = NULL;
	br->bpool_free = NULL;
	free(br->cseg);
	free(br->mrefs);
	free(br->mstatus);
	free(br->pgs);
	br->pgs = NULL;
	br->slots = NULL;
	br->batch = NULL;
	br->cseg = NULL;
	br->mrefs = NULL;
	br->mstatus = NULL;
}

static int add_fd(int epfd, int fd, uint32_t tag, uint32_t flags)
{
	struct epoll_event ev = { .events = EPOLLIN | flags, .data.u32 = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/*
 * The journal's slots order[0..n) by the sequence their requests were
 * taken in, counted from the response producer.  An insertion sort (at
 * most a ring's worth, 512, once per resume): glibc's qsort may ask the
 * kernel how much memory there is (sysinfo), a call a worker's seccomp
 * list does not have.
 */
static void sort_by_seq(const struct xbd_bring *br, unsigned int *order, unsigned int n)
{
	uint32_t base = br->ring.rsp_prod_pvt;

	for (unsigned int i = 1; i < n; i++) {
		unsigned int v = order[i], j = i;
		uint32_t sv = br->jr->ents[v].seq - base;

		for (; j > 0 && br->jr->ents[order[j - 1]].seq - base > sv; j--)
			order[j] = order[j - 1];
		order[j] = v;
	}
}

/*
 * The ring's journal, mapped from the file the control plane handed over
 * (p.journal_fd): a fresh one, started here, or (p.resume) the one a
 * previous daemon or worker left, whose requests taken and not answered
 * as the guest sees it go to br->redo_head, oldest first (journal.h).
 * Every other slot is free.  An error leaves no journal mapped (the
 * control plane decides what then, and removes the file).
 */
static int ring_journal(struct xbd_bring *br)
{
	struct xbd_journal_id id;
	unsigned int i, n = 0, *order = NULL;
	bool *redo = NULL;
	int err;

	slots_init(br, NULL, NULL, 0);
	br->base.rep.nredo = 0;
	br->base.rep.journal_err = 0;
	if (br->base.p.journal_fd < 0)
		return br->base.p.resume ? (br->base.rep.journal_err = -ENOENT) : 0;
	xbd_ring_journal_id(br->base.disk, br->base.idx, &br->base.p, &id);
	err = xbd_journal_map(br->base.p.journal_fd, &br->jr);
	if (err)
		return br->base.rep.journal_err = err;
	if (!xbd_journal_matches(br->jr, &id))
		err = -ESTALE; /* the frontend has another ring now */
	else if (!br->base.p.resume)
		err = xbd_journal_start(br->jr, br->ring.rsp_prod_pvt);
	if (err || !br->base.p.resume) {
		if (err) {
			xbd_journal_close(br->jr);
			br->jr = NULL;
		}
		return br->base.rep.journal_err = err;
	}
	redo = calloc(br->nslots, sizeof(*redo));
	order = calloc(br->nslots, sizeof(*order));
	if (!redo || !order)
		err = -ENOMEM;
	else
		err = xbd_journal_plan(br->jr, br->ring.rsp_prod_pvt, xring_back_req_prod(&br->ring),
				       redo, &n);
	if (!err)
		err = xring_back_resume(&br->ring, br->jr->hdr->consumed);
	if (err) {
		free(redo);
		free(order);
		xbd_journal_close(br->jr);
		br->jr = NULL;
		return br->base.rep.journal_err = err;
	}
	/* Their slots are theirs again; the oldest runs first. */
	for (i = br->nslots, n = 0; i-- > 0;)
		if (redo[i])
			order[n++] = i;
	sort_by_seq(br, order, n);
	slots_init(br, redo, order, n);
	for (i = 0; i < n; i++) {
		struct bk_req *req = br->free;

		xbd_journal_get(&br->jr->ents[req_slot(br, req)], &req->r);
		req_move(br, req, BK_REDO);
	}
	br->base.rep.nredo = n;
	br->base.rep.resumed = true;
	free(redo);
	free(order);
	return 0;
}

/* Map the shared ring, attach to it, and bind its event channel: 0 or -errno. */
static int ring_map(struct xbd_bring *br)
{
	struct xbd_disk *disk = br->base.disk;
	const struct xbd_ring_params *rp = &br->base.p;
	struct xbd_platform *p = xbd_ring_plat(br);
	int16_t st[XBD_RING_MAX_PAGES];
	unsigned int i;
	int err;

	for (i = 0; i < rp->nr_pages; i++)
		st[i] = GNTST_okay;
	br->sring = xbd_gnt_map(p, disk->domid, rp->nr_pages, rp->refs, true, st);
	if (!br->sring) {
		err = -errno;
		for (i = 0; i < rp->nr_pages; i++)
			if (st[i] != GNTST_okay)
				break;
		xbd_log_limited(&disk->crl, XBD_LOG_WARNING, "%s: cannot map the ring (ring-ref %u, status %d)",
			br->base.name, rp->refs[i < rp->nr_pages ? i : 0],
			i < rp->nr_pages ? st[i] : 0);
		return err ? err : -EIO;
	}
	err = xring_attach(&br->ring, br->sring, rp->nr_pages, disk->abi, XRING_BACK);
	if (err)
		return err;
	if (br->base.p.evtchn_fd >= 0) {
		/* Opened for us (restricted to the frontend's domain, where Linux can). */
		err = xbd_evtchn_adopt(p, br->base.p.evtchn_fd, &br->evtchn);
		br->base.p.evtchn_fd = -1;
	} else {
		char saved[XBD_RINGCPU_TAG_LEN];

		xbd_ringcpu_tag(br->base.irq_tag, saved);
		err = xbd_evtchn_open(p, &br->evtchn);
		xbd_ringcpu_untag(br->base.irq_tag, saved);
	}
	if (err)
		return err;
	err = xbd_evtchn_bind_interdomain(br->evtchn, disk->domid, rp->remote_port);
	if (err < 0) {
		xbd_log_limited(&disk->crl, XBD_LOG_WARNING, "%s: cannot bind event channel %u: %s", br->base.name,
			rp->remote_port, strerror(-err));
		return err;
	}
	br->port = err;
	return 0;
}

/* The slots and the per-batch arrays, sized for the ring and its disk: 0 or -ENOMEM. */
static int ring_alloc(struct xbd_bring *br)
{
	const struct xbd_disk *disk = br->base.disk;
	struct iovec *iovs;
	unsigned int i;

	br->nslots = br->ring.nr_ents;
	/* What validation lets through: 11 direct, or the indirect limit offered. */
	br->segmax = br->lim.max_indirect_segs > BLKIF_MAX_SEGMENTS_PER_REQUEST
			     ? br->lim.max_indirect_segs : BLKIF_MAX_SEGMENTS_PER_REQUEST;
	if (br->segmax > XBD_MAX_SEGS)
		br->segmax = XBD_MAX_SEGS;
	br->slots = calloc(br->nslots, sizeof(*br->slots));
	br->batch = calloc(br->nslots, sizeof(*br->batch));
	br->ios = calloc(br->nslots, sizeof(*br->ios));
	iovs = calloc((size_t)br->nslots * br->segmax, sizeof(*iovs));
	br->cseg = calloc(BK_BATCH_SEGS, sizeof(*br->cseg));
	br->mrefs = calloc(BK_BATCH_SEGS, sizeof(*br->mrefs));
	br->mstatus = calloc(BK_BATCH_SEGS, sizeof(*br->mstatus));
	if (disk->persistent)
		br->pgs = calloc((size_t)br->nslots * br->segmax, sizeof(*br->pgs));
	if (disk->copy) {
		/* Untouched pages of the pool cost no memory until a guest uses them. */
		br->bpool = aligned_alloc(XBD_PAGE_SIZE, (size_t)BK_BOUNCE_PAGES * XBD_PAGE_SIZE);
		br->bpool_free = calloc(BK_BOUNCE_PAGES, sizeof(*br->bpool_free));
		if (br->bpool_free)
			for (i = 0; i < BK_BOUNCE_PAGES; i++)
				br->bpool_free[br->bpool_nfree++] = BK_BOUNCE_PAGES - 1 - i;
	}
	if (!br->slots || !br->batch || !br->ios || !iovs || !br->cseg || !br->mrefs ||
	    !br->mstatus || (disk->persistent && !br->pgs) ||
	    (disk->copy && (!br->bpool || !br->bpool_free))) {
		free(iovs);
		return -ENOMEM;
	}
	for (i = 0; i < br->nslots; i++)
		br->slots[i].iov = iovs + (size_t)i * br->segmax;
	return 0;
}

/* The engine's queue, its depth, and the fds the thread waits on: 0 or -errno. */
static int ring_queue_open(struct xbd_bring *br)
{
	struct xbd_disk *disk = br->base.disk;
	int err;

	br->depth = br->nslots + 1 < BK_QUEUE_DEPTH ? br->nslots + 1 : BK_QUEUE_DEPTH;
	err = disk->eng->queue_open(disk->store, br->depth, &br->q);
	if (err)
		return err;
	if (disk->eng->queue_depth && disk->eng->queue_depth(br->q) < br->depth)
		br->depth = disk->eng->queue_depth(br->q);
	/* The bounce pool outlives the queue (ring_release frees it later). */
	if (br->bpool && disk->eng->queue_buffers)
		disk->eng->queue_buffers(br->q, br->bpool, (size_t)BK_BOUNCE_PAGES * XBD_PAGE_SIZE);
	if (!br->depth)
		br->depth = 1;
	if (disk->o.max_batch > br->depth)
		xbd_log_limited(&disk->crl, XBD_LOG_VERBOSE, "%s: max-batch %u is more than the queue depth: "
			"batches of at most %u", br->base.name, disk->o.max_batch, br->depth);
	br->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	br->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (br->stop_fd < 0 || br->epfd < 0)
		return -errno;
	err = add_fd(br->epfd, xbd_evtchn_fd(br->evtchn), 0, 0);
	/* Edge-triggered where the engine allows: its eventfd is then never read. */
	if (!err)
		err = add_fd(br->epfd, disk->eng->queue_fd(br->q), 1,
			     disk->eng->queue_edge ? EPOLLET : 0);
	if (!err && disk->eng->queue_edge)
		disk->eng->queue_edge(br->q);
	if (!err)
		err = add_fd(br->epfd, br->stop_fd, 2, 0);
	return err;
}

/* xbd_ring_here's start: map, bind, allocate, and start the ring's thread. */
static int ring_start_here(struct xbd_ring *r)
{
	struct xbd_bring *br = (struct xbd_bring *)r;
	int err;

	/* The main process's pick for a worker's ring, or this process's own. */
	if (r->p.cpu >= 0)
		r->cpu = r->p.cpu;
	else if (r->cpu < 0)
		r->cpu = xbd_ringcpu_pick();
	/* The disk's I/O limits, shared by its rings (and its group's disks), as it connects. */
	if (r->idx == 0)
		xbd_disk_throttle_update(r->disk);
	/* Nothing of an earlier start (one that failed, or a ring that ran and stopped). */
	memset((char *)br + sizeof(br->base), 0, sizeof(*br) - sizeof(br->base));
	br->port = -1;
	br->masked_port = -1;
	br->epfd = br->stop_fd = -1;
	br->lim = r->disk->lim;
	br->gcache.max = XBD_MAX_PGRANTS;
	err = ring_map(br);
	if (!err)
		err = ring_alloc(br);
	if (!err)
		err = ring_journal(br);
	if (!err)
		err = ring_queue_open(br);
	if (err)
		goto fail;
	/* Its line of the disk's tracking: what a dead process counted there is not out. */
	cbt_ring_reset(br);
	/* Running before the thread is: it may reach its end before we look again. */
	xbd_ring_set_life(r, XBD_RING_RUNNING);
	err = -pthread_create(&br->thread, NULL, ring_main, br);
	if (err) {
		xbd_ring_set_life(r, XBD_RING_IDLE);
		goto fail;
	}
	r->rep.port = br->port;
	xbd_ringcpu_place_irq(r->name, r->cpu, r->irq_tag);
	return 0;
fail:
	ring_release(br);
	return err;
}

/*
 * After the thread stopped: every request it consumed must have been
 * req_answered (its slot is free).  Requests the frontend queued that we never
 * consumed stay in the shared ring, where the next backend (a restarted
 * xbd-back) finds them; on SIGTERM the log says how many.
 */
static void stop_report(struct xbd_bring *br)
{
	unsigned int i, busy = 0;
	int left;

	for (i = 0; i < br->nslots; i++)
		if (br->slots[i].state != BK_FREE)
			busy++;
	left = br->base.rep.failed ? 0 : xring_back_pending(&br->ring);
	br->base.rep.stop_busy = busy;
	br->base.rep.stop_left = left < 0 ? 0 : left;
	if (busy)
		xbd_log_limited(&br->base.disk->crl, XBD_LOG_WARNING, "%s: stopped with %u consumed requests NOT answered",
			br->base.name, busy);
	else if (br->base.disk->host->stopping)
		xbd_log_limited(&br->base.disk->crl, XBD_LOG_INFO, "%s: stopped: every consumed request answered "
			"(%u in flight at the stop), %d left in the ring for the next backend",
			br->base.name, br->base.rep.stop_inflight, left < 0 ? 0 : left);
}

/* xbd_ring_here's request_stop */
static void ring_request_stop_here(struct xbd_ring *r)
{
	struct xbd_bring *br = (struct xbd_bring *)r;
	uint64_t one = 1;

	if (xbd_ring_life(r) == XBD_RING_IDLE || r->stop)
		return;
	/* Seen at the top of the loop even by a thread that never sleeps. */
	r->stop = true;
	if (write(br->stop_fd, &one, sizeof(one)) < 0) {
		/* Counter already set. */
	}
}

/* xbd_ring_here's stop: join the thread (bounded at SIGTERM) and release the ring. */
static void ring_stop_here(struct xbd_ring *r)
{
	struct xbd_bring *br = (struct xbd_bring *)r;

	xbd_ringcpu_put(r->cpu);
	r->cpu = -1;
	if (xbd_ring_life(r) != XBD_RING_IDLE) {
		uint64_t deadline = r->disk->host->stop_deadline_ms;

		ring_request_stop_here(r);
		/*
		 * SIGTERM: joined once it has answered what it took, but never
		 * past the deadline.  A ring whose storage still has its requests
		 * then is left as it is, thread and all, to its journal: the
		 * daemon ends as if killed (xbd-back.c), and the next one executes
		 * them again, so the guest keeps its disk.
		 */
		while (deadline && !xbd_ring_exited(r) && xbd_mono_ns() / 1000000u < deadline)
			usleep(2000);
		if (deadline && !xbd_ring_exited(r)) {
			xbd_log_limited(&r->disk->crl, XBD_LOG_WARNING, "%s: its storage still has "
					"requests at the stop deadline: left to its journal, as if "
					"killed (the next xbd-back executes them again)", r->name);
			r->rep.abandoned = true;
			r->disk->unclean = true;
			r->disk->host->abandoned = true;
			return;
		}
		pthread_join(br->thread, NULL);
		xbd_ring_set_life(r, XBD_RING_IDLE);
		stop_report(br);
		if (xbd_log_level() >= XBD_LOG_DEBUG)
			xbd_stats_print(stderr, r->name, r->stats);
	}
	ring_release(br);
}

static const struct xbd_ring_ops ring_thread_ops;

/* xbd_ring_here's create */
static struct xbd_ring *ring_create_here(struct xbd_ring_server *srv, struct xbd_disk *disk,
					 unsigned int idx)
{
	struct xbd_bring *br = calloc(1, sizeof(*br));

	(void)srv;
	if (!br)
		return NULL;
	xbd_ring_base_init(&br->base, &ring_thread_ops, disk, idx);
	br->port = -1;
	br->epfd = br->stop_fd = -1;
	return &br->base;
}

/* xbd_ring_here's destroy (once stopped: ring_release freed the rest) */
static void ring_destroy_here(struct xbd_ring *r)
{
	free(r);
}

/* xbd_ring_here's shared: mapped in this process, read as it is now. */
static bool ring_shared_here(const struct xbd_ring *r, struct xring_shared_idx *sh)
{
	const struct xbd_bring *br = (const struct xbd_bring *)r;

	if (!br->sring)
		return false;
	xring_read_shared(&br->ring, sh);
	return true;
}

static const struct xbd_ring_ops ring_thread_ops = {
	.create = ring_create_here,
	.start = ring_start_here,
	.request_stop = ring_request_stop_here,
	.stop = ring_stop_here,
	.destroy = ring_destroy_here,
	.shared = ring_shared_here,
};

struct xbd_ring_server xbd_ring_here = { .ops = &ring_thread_ops };
