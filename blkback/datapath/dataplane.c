/*
 * dataplane.c: one ring's I/O thread.  It wakes on the ring's event
 * channel or on storage completions, consumes every pending request (each
 * copied out of the shared ring once and validated completely), maps or
 * copies the batch's grants in one platform call, submits the batch to
 * the storage engine, reaps completions in batches and answers with
 * notification suppression, re-checking the ring before it sleeps.
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
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "blkback/datapath/ring.h"
#include "blkback/datapath/ringcpu.h"
#include "blkback/datapath/throttle.h"

#define REAP_MAX 64

/*
 * Segments (data pages and indirect pages) one consumed batch may carry;
 * the per-batch arrays (grant copy segments, map references) are sized
 * for it rather than for every slot at 256 segments (8 MB a ring at
 * order 4).  4 MiB of data a batch still fills any disk.
 */
#define BK_BATCH_SEGS 1024
/* Grant copy: bounce pages per ring (Linux blkback's max_buffer_pages, 4 MiB). */
#define BK_BOUNCE_PAGES 1024
/*
 * I/Os a ring keeps in flight in the engine.  An aio context of the
 * ring's full size (513 at order 4, times 16 queues) would let a few
 * guests use up the host's fs.aio-max-nr (65536); requests beyond this
 * wait in the submit queue (counted in oo_req).
 */
#define BK_QUEUE_DEPTH 128
/*
 * Largest io_submit batch on storage that completes inside io_submit
 * (submit_queued): half the default max-batch, so that a consumed batch
 * of a queue-depth-32 guest is answered in two halves.  Measured on tmpfs,
 * 4k random reads at QD32: 370-395k IOPS answering whole batches,
 * 600-670k with chunks of 8 to 16.
 */
#define BK_SYNC_CHUNK 16

/*
 * A ring held back by its disk's I/O limits looks at them again at least
 * this often: a limit raised or removed by xbdctl set takes effect within
 * it (10 wake-ups a second while held, nothing otherwise).
 */
#define THROTTLE_RECHECK_NS 100000000ull

/* ---- test-only crash points (--enable-test-hooks; never in a production build) ---- */

#ifdef XBD_TEST_HOOKS
/*
 * XBD_TEST_CRASH=POINT[:N]: the process kills itself with SIGKILL the Nth
 * time (1 by default) any ring thread reaches POINT, so that the crash
 * tests can choose the instant (tests/robust/crash-points.sh).
 */
static void crash_point(const char *point)
{
	static uint64_t hits;
	const char *spec = getenv("XBD_TEST_CRASH");
	size_t len = strlen(point);
	unsigned long nth = 1;

	if (!spec || strncmp(spec, point, len) || (spec[len] && spec[len] != ':'))
		return;
	if (spec[len] == ':')
		nth = strtoul(spec + len + 1, NULL, 10);
	if (__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED) == nth)
		raise(SIGKILL);
}
#define CRASH_POINT(point) crash_point(point)
#else
#define CRASH_POINT(point) do { } while (0)
#endif

/* ---- the clock ---- */

/*
 * A clock read dearer than this is a system call: a PV dom0 whose TSC Xen
 * does not call stable has no vDSO clock, and each clock_gettime is a
 * trip through the hypervisor (tens of microseconds under emulation); on
 * a native host a system call costs 150-250 ns, a vDSO read 20-50 ns.
 */
#define CLOCK_DEAR_NS 120

static pthread_once_t clock_once = PTHREAD_ONCE_INIT;
static bool clock_dear;
static uint64_t spin_ps; /* one spin of the polling loop, in picoseconds */
#ifdef XBD_TEST_HOOKS
/* XBD_TEST_CLOCK=syscall: every read a real system call, as in a PV dom0. */
static bool clock_test_syscall;
#endif

static uint64_t clock_read(void)
{
#ifdef XBD_TEST_HOOKS
	if (clock_test_syscall) {
		struct timespec ts;

		syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
		return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
#endif
	return xbd_mono_ns();
}

static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause(); /* be kind to a sibling hyperthread */
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory"); /* Linux's cpu_relax() on arm64 */
#endif
}

/*
 * What a clock read costs here (the fastest of three rounds of 32), and
 * what a spin of the polling loop costs (the fastest of three rounds of
 * 1024: a load from shared memory and a pause).
 */
static void clock_calibrate(void)
{
	uint64_t best = UINT64_MAX, spin = UINT64_MAX;
	unsigned int round, i;
	volatile uint32_t idx = 0;

#ifdef XBD_TEST_HOOKS
	const char *t = getenv("XBD_TEST_CLOCK");

	clock_test_syscall = t && !strcmp(t, "syscall");
#endif
	for (round = 0; round < 3; round++) {
		uint64_t t0 = clock_read(), t1;

		for (i = 0; i < 32; i++)
			(void)clock_read();
		t1 = clock_read();
		if ((t1 - t0) / 33 < best)
			best = (t1 - t0) / 33;
	}
	for (round = 0; round < 3; round++) {
		uint64_t t0 = clock_read(), t1;

		for (i = 0; i < 1024; i++) {
			(void)idx;
			spin_pause();
		}
		t1 = clock_read();
		if (t1 - t0 < spin)
			spin = t1 - t0;
	}
	spin_ps = spin * 1000 / 1024;
	if (!spin_ps)
		spin_ps = 1;
	clock_dear = best >= CLOCK_DEAR_NS;
#ifdef XBD_TEST_HOOKS
	clock_dear = clock_dear || clock_test_syscall;
#endif
	xbd_log(XBD_LOG_VERBOSE, "a clock read costs %" PRIu64 " ns here%s", best,
		clock_dear ? " (a system call: no vDSO clock): a ring's sleep and poll "
			     "start at its latest read" : "");
}

/* A fresh read, which the ring keeps as its latest. */
static uint64_t ring_now(struct xbd_bring *br)
{
	XBD_STAT_INC(br->stats, clock_reads);
	br->clock_ns = clock_read();
	br->clock_turn = true;
	return br->clock_ns;
}

/*
 * When a sleep or a poll begins.  Where a read is a system call, the
 * ring's latest read since it last woke stands in for it: it is older by
 * what the turn did since (a consume, a submit, a push), which makes a
 * sleep look that much longer to the polling windows and a masked port
 * or a retired mapping wait that much longer.  That saves two reads per
 * request at queue depth 1, where a PV dom0 made four.
 */
static uint64_t ring_since(struct xbd_bring *br)
{
	return clock_dear && br->clock_turn ? br->clock_ns : ring_now(br);
}

/* ---- a request's life (ring.h: enum bk_req_state) ---- */

static unsigned int slot_index(const struct xbd_bring *br, const struct bk_req *req)
{
	return (unsigned int)(req - br->slots);
}

#define BK_S(state) (1u << (state))
/* The states each state may be entered from (ring.h says why). */
static const uint16_t req_entered_from[] = {
	[BK_FREE] = BK_S(BK_ANSWERED),
	[BK_REDO] = BK_S(BK_FREE),
	[BK_TAKEN] = BK_S(BK_FREE) | BK_S(BK_REDO),
	[BK_DRAINING] = BK_S(BK_TAKEN),
	[BK_QUEUED] = BK_S(BK_TAKEN) | BK_S(BK_DRAINING) | BK_S(BK_INFLIGHT),
	[BK_INFLIGHT] = BK_S(BK_QUEUED),
	[BK_COPYOUT] = BK_S(BK_INFLIGHT),
	[BK_DONE] = BK_S(BK_QUEUED) | BK_S(BK_INFLIGHT),
	[BK_ANSWERED] = BK_S(BK_TAKEN) | BK_S(BK_DRAINING) | BK_S(BK_QUEUED) |
			BK_S(BK_INFLIGHT) | BK_S(BK_COPYOUT) | BK_S(BK_DONE),
};

/* The head of the list a request in state s is on, or NULL: none. */
static struct bk_req **req_list(struct xbd_bring *br, struct bk_req *req, enum bk_req_state s)
{
	switch (s) {
	case BK_FREE:
		return &br->free;
	case BK_REDO:
		return &br->redo_head;
	case BK_QUEUED:
		return &br->submit_head;
	case BK_COPYOUT:
		return &br->copyout;
	case BK_DONE:
		return &req->region->finished;
	case BK_ANSWERED:
		return &br->answered_head;
	default:
		return NULL;
	}
}

/* The tail of that list, where requests join it in order; NULL: they join at its head. */
static struct bk_req **req_list_tail(struct xbd_bring *br, enum bk_req_state s)
{
	return s == BK_QUEUED ? &br->submit_tail : s == BK_ANSWERED ? &br->answered_tail : NULL;
}

static const char *const req_state_names[] = {
	[BK_FREE] = "FREE", [BK_REDO] = "REDO", [BK_TAKEN] = "TAKEN",
	[BK_DRAINING] = "DRAINING", [BK_QUEUED] = "QUEUED", [BK_INFLIGHT] = "INFLIGHT",
	[BK_COPYOUT] = "COPYOUT", [BK_DONE] = "DONE", [BK_ANSWERED] = "ANSWERED",
};

/*
 * A move ring.h does not allow, or a request taken off a list it does
 * not head: a bug here, said once in a line (and fatal in a build with
 * test hooks, so that the tests catch it).
 */
static void req_bug(struct xbd_bring *br, struct bk_req *req, enum bk_req_state to)
{
	static bool said;

	if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		xbd_log(XBD_LOG_ERR, "%s: request slot %u went from %s to %s (a bug in xbd-back)",
			br->name, slot_index(br, req), req_state_names[req->state], req_state_names[to]);
#ifdef XBD_TEST_HOOKS
	abort();
#endif
}

/*
 * The one place a request's state changes: off the list of its old state
 * (at its head), onto the list of the new one, and the journal's entry
 * with it (journal.h: taken at step 2, answered at step 4, free at step 9).
 */
static void req_move(struct xbd_bring *br, struct bk_req *req, enum bk_req_state to)
{
	enum bk_req_state from = req->state;
	struct bk_req **head = req_list(br, req, from), **tail = req_list_tail(br, from);

	if (!(req_entered_from[to] & BK_S(from)) || (head && *head != req))
		req_bug(br, req, to);
	if (head) {
		*head = req->next;
		if (!*head && tail)
			*tail = NULL;
	}
	if (from == BK_INFLIGHT)
		br->inflight--;
	req->state = to;
	req->next = NULL;
	switch (to) {
	case BK_FREE:
		if (br->jr)
			xbd_journal_free(br->jr, slot_index(br, req));
		break;
	case BK_TAKEN:
		/* In the journal before any response can overwrite its ring slot. */
		if (from == BK_FREE && br->jr)
			xbd_journal_take(br->jr, slot_index(br, req), br->ring.req_cons - 1, &req->r);
		/* Nothing of its last request left. */
		req->step = BK_STEP_OP;
		req->region = NULL;
		req->consumed_ns = 0;
		req->status = BLKIF_RSP_OKAY;
		req->thr_paid = false;
		req->thr_since = 0;
		break;
	case BK_DRAINING:
		br->barrier = req;
		break;
	case BK_INFLIGHT:
		br->inflight++;
		break;
	case BK_ANSWERED:
		/* Before the response is written into the ring slot rsp_prod_pvt. */
		if (br->jr)
			xbd_journal_answer(br->jr, slot_index(br, req), br->ring.rsp_prod_pvt);
		/* fall through */
	case BK_DONE:
		if (req == br->barrier)
			br->barrier = NULL;
		break;
	default:
		break;
	}
	head = req_list(br, req, to);
	tail = req_list_tail(br, to);
	if (tail) {
		if (*tail)
			(*tail)->next = req;
		else
			*head = req;
		*tail = req;
	} else if (head) {
		req->next = *head;
		*head = req;
	}
}

/* Whether the request has its response written: the batch phases pass it by. */
static bool answered(const struct bk_req *req)
{
	return req->state == BK_ANSWERED;
}

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

/* ---- responses ---- */

/*
 * Answer the request: the one place a request ends.  The response is
 * written field by field (ring.h), after the journal says so (journal.h,
 * step 4); the slot waits for push() before it is reused.
 */
static void respond(struct xbd_bring *br, struct bk_req *req, int16_t status)
{
	req_move(br, req, BK_ANSWERED);
	CRASH_POINT("answered");
	xring_back_put_response(&br->ring, req->r.id, req->r.operation, status);
	CRASH_POINT("responded");
	if (req->consumed_ns)
		xbd_lat_note(&br->lat, br->stats, req->r.operation, req->consumed_ns);
	if (req->bounce) {
		unsigned int k;

		/* Each segment's buffer lies in its own pool page (copy_in). */
		for (k = 0; k < req->r.nr_segments; k++) {
			uintptr_t pg = (uintptr_t)req->iov[k].iov_base & ~(uintptr_t)(XBD_PAGE_SIZE - 1);

			br->bpool_free[br->bpool_nfree++] =
				(uint16_t)(((char *)pg - br->bpool) / XBD_PAGE_SIZE);
		}
		req->bounce = NULL;
	}
}

static void reject(struct xbd_bring *br, struct bk_req *req, enum xbd_req_error e)
{
	XBD_STAT_INC(br->stats, errors[e]);
	xbd_log_limited(&br->disk->rl, XBD_LOG_WARNING,
			"%s: request refused: %s (op %u, sector %" PRIu64 ", %u segments)",
			br->name, xbd_req_strerror(e), req->r.raw_operation,
			req->r.sector_number, req->r.nr_segments);
	respond(br, req, xbd_req_error_status(e));
}

static void grant_fail(struct xbd_bring *br, struct bk_req *req, uint32_t ref, int st)
{
	XBD_STAT_INC(br->stats, grant_errors);
	xbd_log_limited(&br->disk->rl, XBD_LOG_WARNING, "%s: request refused: grant %u not usable (status %d)",
			br->name, ref, st);
	respond(br, req, BLKIF_RSP_ERROR);
}

/* Release the request's grants; answer it now, or once its batch map is unmapped. */
static void finish(struct xbd_bring *br, struct bk_req *req, int16_t status)
{
	struct bk_region *rg = req->region;
	unsigned int i;

	if (req->pg) {
		for (i = 0; i < req->r.nr_segments; i++)
			if (req->pg[i])
				grant_cache_put(br, req->pg[i]);
		req->pg = NULL;
	}
	if (!rg) {
		respond(br, req, status);
		return;
	}
	/*
	 * The frontend may end its grants as soon as it sees the response,
	 * so the pages are unmapped first.
	 */
	req->status = status;
	req_move(br, req, BK_DONE);
	if (--rg->refs)
		return;
	xbd_gnt_unmap(xbd_ring_plat(br), rg->addr, rg->count);
	XBD_STAT_INC(br->stats, grant_unmap_calls);
	while (rg->finished) {
		struct bk_req *r = rg->finished;

		respond(br, r, r->status);
		r->region = NULL;
	}
	free(rg);
}

/* ---- consuming and preparing a batch ---- */

static bool needs_grants(const struct bk_req *req)
{
	return (req->r.operation == BLKIF_OP_READ || req->r.operation == BLKIF_OP_WRITE ||
		req->r.operation == BLKIF_OP_WRITE_BARRIER) && req->r.nr_segments;
}

static void set_iov(struct bk_req *req, unsigned int k, void *page)
{
	const struct xbd_seg *s = &req->r.seg[k];

	req->iov[k].iov_base = (char *)page + ((size_t)s->first_sect << XBD_SECTOR_SHIFT);
	req->iov[k].iov_len = (size_t)(s->last_sect - s->first_sect + 1) << XBD_SECTOR_SHIFT;
}

/*
 * The outcome of one request's count segments of a grant copy, starting at
 * cs[first]: true when the call was made (ret 0) and every segment copied;
 * otherwise *ref and *st name the first failure (st is ret when the call
 * itself failed).
 */
static bool copy_segs_ok(const struct xbd_gnt_copy_seg *cs, unsigned int first,
			 unsigned int count, int ret, uint32_t *ref, int *st)
{
	unsigned int k;

	*ref = 0;
	*st = ret;
	if (ret)
		return false;
	for (k = first; k < first + count; k++)
		if (cs[k].status != GNTST_okay) {
			*ref = cs[k].ref;
			*st = cs[k].status;
			return false;
		}
	return true;
}

/* Indirect pages: one grant copy for every indirect request of the batch. */
static void load_indirect(struct xbd_bring *br, struct bk_req **batch, unsigned int nb)
{
	struct xbd_gnt_copy_seg *cs = br->cseg;
	unsigned int i, p, n = 0;
	int ret;

	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];

		if (answered(req) || !req->r.indirect)
			continue;
		if (!req->ind) {
			req->ind = aligned_alloc(XBD_PAGE_SIZE,
						 XBD_MAX_INDIRECT_PAGES * XBD_PAGE_SIZE);
			if (!req->ind) {
				respond(br, req, BLKIF_RSP_ERROR);
				continue;
			}
		}
		for (p = 0; p < req->r.nr_indirect_pages; p++) {
			cs[n].local = (char *)req->ind + p * XBD_PAGE_SIZE;
			cs[n].domid = br->disk->domid;
			cs[n].ref = req->r.indirect_grefs[p];
			cs[n].offset = 0;
			cs[n].len = XBD_PAGE_SIZE;
			cs[n].to_guest = false;
			cs[n].status = GNTST_okay;
			n++;
		}
	}
	if (!n)
		return;
	XBD_STAT_INC(br->stats, grant_copy_calls);
	ret = xbd_gnt_copy(xbd_ring_plat(br), n, cs);
	n = 0;
	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];
		const void *pages[XBD_MAX_INDIRECT_PAGES];
		bool ok;
		uint32_t bad_ref;
		int bad_st;

		if (answered(req) || !req->r.indirect)
			continue;
		ok = copy_segs_ok(cs, n, req->r.nr_indirect_pages, ret, &bad_ref, &bad_st);
		n += req->r.nr_indirect_pages;
		for (p = 0; p < req->r.nr_indirect_pages; p++)
			pages[p] = (char *)req->ind + p * XBD_PAGE_SIZE;
		if (!ok) {
			grant_fail(br, req, bad_ref, bad_st);
			continue;
		}
		xbd_req_load_indirect(&req->r, pages);
	}
}

/* Map one request's segments on its own (after a batch map failed). */
static void map_one(struct xbd_bring *br, struct bk_req *req, bool writable)
{
	unsigned int k, n = req->r.nr_segments;
	struct bk_region *rg;
	void *addr;

	for (k = 0; k < n; k++) {
		br->mrefs[k] = req->r.seg[k].gref;
		br->mstatus[k] = GNTST_okay;
	}
	XBD_STAT_INC(br->stats, grant_map_calls);
	addr = xbd_gnt_map(xbd_ring_plat(br), br->disk->domid, n, br->mrefs, writable, br->mstatus);
	if (!addr) {
		uint32_t ref = req->r.seg[0].gref;
		int st = GNTST_general_error;

		for (k = 0; k < n; k++) {
			if (br->mstatus[k] != GNTST_okay) {
				ref = br->mrefs[k];
				st = br->mstatus[k];
				break;
			}
		}
		grant_fail(br, req, ref, st);
		return;
	}
	rg = calloc(1, sizeof(*rg));
	if (!rg) {
		xbd_gnt_unmap(xbd_ring_plat(br), addr, n);
		respond(br, req, BLKIF_RSP_ERROR);
		return;
	}
	rg->addr = addr;
	rg->count = n;
	rg->refs = 1;
	req->region = rg;
	for (k = 0; k < n; k++)
		set_iov(req, k, (char *)addr + (size_t)k * XBD_PAGE_SIZE);
}

/*
 * Map the grants of every request of one direction with one call: reads
 * need writable mappings, writes only read access (Linux blkfront grants
 * write buffers read-only).  If the batch call fails, map request by
 * request so that only the requests with a bad grant fail.
 */
static void map_batch(struct xbd_bring *br, struct bk_req **batch, unsigned int nb, bool reads)
{
	unsigned int i, k, n = 0, nreq = 0;
	struct bk_region *rg;
	void *addr;

	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];

		if (answered(req) || !needs_grants(req) || (req->r.operation == BLKIF_OP_READ) != reads)
			continue;
		for (k = 0; k < req->r.nr_segments; k++) {
			br->mrefs[n] = req->r.seg[k].gref;
			br->mstatus[n] = GNTST_okay;
			n++;
		}
		nreq++;
	}
	if (!n)
		return;
	XBD_STAT_INC(br->stats, grant_map_calls);
	addr = xbd_gnt_map(xbd_ring_plat(br), br->disk->domid, n, br->mrefs, reads, br->mstatus);
	rg = addr ? calloc(1, sizeof(*rg)) : NULL;
	if (addr && !rg) {
		xbd_gnt_unmap(xbd_ring_plat(br), addr, n);
		addr = NULL;
	}
	n = 0;
	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];

		if (answered(req) || !needs_grants(req) || (req->r.operation == BLKIF_OP_READ) != reads)
			continue;
		if (!addr) {
			map_one(br, req, reads);
			continue;
		}
		req->region = rg;
		for (k = 0; k < req->r.nr_segments; k++, n++)
			set_iov(req, k, (char *)addr + (size_t)n * XBD_PAGE_SIZE);
	}
	if (rg) {
		rg->addr = addr;
		rg->count = n;
		rg->refs = nreq;
	}
}

/*
 * Persistent grants: cached pages, and the batch's misses mapped with one
 * call (DESIGN step 3).  The pages of that mapping become cache entries
 * sharing one region, unmapped when its last entry is evicted; while
 * such partly dead regions pin more than twice the cache's worth of
 * pages, misses are mapped one by one again.  If the batch call fails,
 * each miss is mapped on its own so that only requests with a bad grant
 * fail.
 */
static void map_persistent(struct xbd_bring *br, struct bk_req **batch, unsigned int nb)
{
	unsigned int i, k, n = 0, idx = 0;
	struct bk_pregion *rg = NULL;
	void *addr = NULL;

	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];
		struct bk_pgrant **pg;

		if (answered(req) || !needs_grants(req))
			continue;
		pg = req->pg = br->pgs + (size_t)(req - br->slots) * br->segmax;
		for (k = 0; k < req->r.nr_segments; k++) {
			pg[k] = grant_cache_lookup(br, req->r.seg[k].gref);
			if (!pg[k]) {
				br->mrefs[n] = req->r.seg[k].gref;
				br->mstatus[n] = GNTST_okay;
				n++;
			}
		}
	}
	if (n > 1 && br->pg_pinned + n <= 2 * br->gcache.max + BK_BATCH_SEGS) {
		XBD_STAT_INC(br->stats, grant_map_calls);
		addr = xbd_gnt_map(xbd_ring_plat(br), br->disk->domid, n, br->mrefs, true, br->mstatus);
		rg = addr ? calloc(1, sizeof(*rg) + (size_t)n * sizeof(rg->ents[0])) : NULL;
		if (addr && !rg) {
			xbd_gnt_unmap(xbd_ring_plat(br), addr, n);
			addr = NULL;
		}
		if (rg) {
			rg->addr = addr;
			rg->count = n;
			rg->building = true;
			br->pg_pinned += n;
		}
	}
	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];
		struct bk_pgrant **pg;
		uint32_t bad_ref = 0;
		int16_t bad_st = GNTST_okay;

		if (answered(req) || !needs_grants(req))
			continue;
		pg = req->pg;
		for (k = 0; k < req->r.nr_segments; k++) {
			uint32_t gref = req->r.seg[k].gref;
			int16_t st = GNTST_okay;
			void *page;

			if (pg[k])
				continue; /* a hit */
			page = addr ? (char *)addr + (size_t)idx * XBD_PAGE_SIZE : NULL;
			idx++;
			if (bad_st != GNTST_okay)
				continue; /* the request fails anyway */
			/* The same grant twice in the batch: the first mapping serves both. */
			pg[k] = grant_cache_lookup(br, gref);
			if (!pg[k] && page) {
				XBD_STAT_INC(br->stats, persistent_misses);
				pg[k] = grant_cache_add(br, gref, page, rg, idx - 1);
				st = GNTST_no_device_space;
			} else if (!pg[k]) {
				pg[k] = grant_cache_get(br, gref, &st);
			}
			if (!pg[k]) {
				bad_ref = gref;
				bad_st = st != GNTST_okay ? st : GNTST_general_error;
			}
		}
		if (bad_st != GNTST_okay) {
			for (k = 0; k < req->r.nr_segments; k++)
				if (pg[k])
					grant_cache_put(br, pg[k]);
			req->pg = NULL;
			grant_fail(br, req, bad_ref, bad_st);
			continue;
		}
		for (k = 0; k < req->r.nr_segments; k++)
			set_iov(req, k, pg[k]->addr);
	}
	/* Pages that are duplicates or belong to failed requests: see grant_region_check. */
	if (rg) {
		rg->building = false;
		grant_region_check(br, rg);
	}
}

/* Grant copy: the request's data segments into cs[n...) (to or from the guest); the next n. */
static unsigned int copy_segs(const struct xbd_bring *br, const struct bk_req *req,
			      struct xbd_gnt_copy_seg *cs, unsigned int n, bool to_guest)
{
	for (unsigned int k = 0; k < req->r.nr_segments; k++, n++) {
		cs[n].local = req->iov[k].iov_base;
		cs[n].domid = br->disk->domid;
		cs[n].ref = req->r.seg[k].gref;
		cs[n].offset = req->r.seg[k].first_sect << XBD_SECTOR_SHIFT;
		cs[n].len = req->iov[k].iov_len;
		cs[n].to_guest = to_guest;
		cs[n].status = GNTST_okay;
	}
	return n;
}

/* Grant copy: bounce buffers, write data copied in with one call. */
static void copy_in(struct xbd_bring *br, struct bk_req **batch, unsigned int nb)
{
	struct xbd_gnt_copy_seg *cs = br->cseg;
	unsigned int i, k, n = 0;
	int ret;

	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];

		if (answered(req) || !needs_grants(req))
			continue;
		/* consume() stopped before the pool could run short. */
		if (!br->bpool || br->bpool_nfree < req->r.nr_segments) {
			respond(br, req, BLKIF_RSP_ERROR);
			continue;
		}
		for (k = 0; k < req->r.nr_segments; k++) {
			unsigned int pi = br->bpool_free[--br->bpool_nfree];

			set_iov(req, k, br->bpool + (size_t)pi * XBD_PAGE_SIZE);
		}
		req->bounce = br->bpool;
		if (req->r.operation == BLKIF_OP_READ)
			continue;
		n = copy_segs(br, req, cs, n, false);
	}
	if (!n)
		return;
	XBD_STAT_INC(br->stats, grant_copy_calls);
	ret = xbd_gnt_copy(xbd_ring_plat(br), n, cs);
	n = 0;
	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];
		uint32_t ref;
		int st;

		if (answered(req) || !needs_grants(req) || req->r.operation == BLKIF_OP_READ)
			continue;
		n += req->r.nr_segments;
		if (!copy_segs_ok(cs, n - req->r.nr_segments, req->r.nr_segments, ret, &ref, &st)) {
			grant_fail(br, req, ref, st);
		}
	}
}

/*
 * Grant copy: read data copied out to the guest for every finished read
 * (BK_COPYOUT), one call for up to BK_BATCH_SEGS segments (the size of
 * cseg), from the list's head; a call more for the rest.
 */
static void copy_out(struct xbd_bring *br)
{
	struct xbd_gnt_copy_seg *cs = br->cseg;

	while (br->copyout) {
		struct bk_req *req, *end;
		unsigned int n = 0;
		int ret;

		for (end = br->copyout; end && n + end->r.nr_segments <= BK_BATCH_SEGS; end = end->next)
			n += end->r.nr_segments;
		n = 0;
		for (req = br->copyout; req != end; req = req->next)
			n = copy_segs(br, req, cs, n, true);
		XBD_STAT_INC(br->stats, grant_copy_calls);
		ret = xbd_gnt_copy(xbd_ring_plat(br), n, cs);
		n = 0;
		/* Each answered takes itself off the list's head. */
		while (br->copyout != end) {
			bool ok;
			uint32_t ref;
			int st;

			req = br->copyout;
			ok = copy_segs_ok(cs, n, req->r.nr_segments, ret, &ref, &st);
			n += req->r.nr_segments;
			if (ok)
				finish(br, req, BLKIF_RSP_OKAY);
			else
				grant_fail(br, req, ref, st);
		}
	}
}

/* Fill the request's engine operation. */
static void prep_io(struct xbd_bring *br, struct bk_req *req)
{
	struct xbd_io *io = &req->io;
	enum xbd_cache_mode cache = br->disk->o.cache;
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
	if (durable && br->disk->o.fua_mode == XBD_FUA_FDATASYNC)
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
			XBD_STAT_INC(br->stats, oo_req);
			br->starved = true;
			break;
		}
		/*
		 * Grant copy: out of bounce pages until requests complete.  The
		 * guest's requests wait in its ring (Linux blkback does the same).
		 */
		if (br->bpool && pages + br->segmax > br->bpool_nfree) {
			XBD_STAT_INC(br->stats, oo_req);
			br->starved = true;
			break;
		}
		if (br->redo_head) {
			req = br->redo_head;
		} else {
			int n;

			/* Consumed into the free list's head, which leaves the list only if a request came. */
			req = br->free;
			if (!req) {
				XBD_STAT_INC(br->stats, oo_req);
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
		CRASH_POINT("consumed");
	}
	return (int)nb;
}

/*
 * consume, step 2 (check): indirect headers, then their pages, then full
 * validation; what fails is answered (reject), what passes is counted and
 * carries the batch's consume time t.
 */
static void check_batch(struct xbd_bring *br, struct bk_req **batch, unsigned int nb, uint64_t t)
{
	unsigned int i;

	for (i = 0; i < nb; i++) {
		enum xbd_req_error e = xbd_req_check_indirect(&batch[i]->r, &br->lim);

		if (e) {
			reject(br, batch[i], e);
		}
	}
	load_indirect(br, batch, nb);
	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];
		enum xbd_req_error e;

		if (answered(req))
			continue;
		e = xbd_req_validate(&req->r, &br->lim);
		if (e) {
			reject(br, req, e);
			continue;
		}
		req->consumed_ns = t;
		switch (req->r.operation) {
		case BLKIF_OP_READ:
			XBD_STAT_INC(br->stats, rd_req);
			XBD_STAT_ADD(br->stats, rd_sect, req->r.nr_sectors);
			break;
		case BLKIF_OP_WRITE:
			XBD_STAT_INC(br->stats, wr_req);
			XBD_STAT_ADD(br->stats, wr_sect, req->r.nr_sectors);
			break;
		case BLKIF_OP_WRITE_BARRIER:
			XBD_STAT_INC(br->stats, barrier_req);
			XBD_STAT_ADD(br->stats, wr_sect, req->r.nr_sectors);
			break;
		case BLKIF_OP_FLUSH_DISKCACHE:
			XBD_STAT_INC(br->stats, f_req);
			break;
		case BLKIF_OP_DISCARD:
			XBD_STAT_INC(br->stats, ds_req);
			break;
		}
	}
}

/* consume, step 3 (grants): the batch's data pages, copied in, or mapped (persistently or per batch). */
static void grant_batch(struct xbd_bring *br, struct bk_req **batch, unsigned int nb)
{
	if (br->disk->copy) {
		copy_in(br, batch, nb);
	} else if (br->disk->persistent) {
		map_persistent(br, batch, nb);
	} else {
		map_batch(br, batch, nb, true);
		map_batch(br, batch, nb, false);
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

		if (answered(req))
			continue;
		prep_io(br, req);
		if (req->r.operation == BLKIF_OP_WRITE_BARRIER) {
			req_move(br, req, BK_DRAINING);
			if (br->inflight || br->submit_head)
				CRASH_POINT("drain"); /* earlier requests still in flight */
			continue;
		}
		if (req->r.operation == BLKIF_OP_FLUSH_DISKCACHE &&
		    br->disk->o.cache != XBD_CACHE_WRITEBACK) {
			/* unsafe: nothing to honour; writethrough: every write is durable already. */
			finish(br, req, BLKIF_RSP_OKAY);
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
static int consume(struct xbd_bring *br)
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
	grant_batch(br, br->batch, (unsigned int)nb);
	queue_batch(br, br->batch, (unsigned int)nb);
	return nb;
}

/* ---- submission and completion ---- */

static void io_failed(struct xbd_bring *br, struct bk_req *req, int err)
{
	XBD_STAT_INC(br->stats, io_errors);
	xbd_log_limited(&br->disk->rl, XBD_LOG_WARNING, "%s: I/O error on op %u sector %" PRIu64 ": %s",
			br->name, req->r.operation, req->r.sector_number, strerror(-err));
}

static void complete(struct xbd_bring *br, struct bk_req *req, int result);
static unsigned int reap_all(struct xbd_bring *br);
static void push(struct xbd_bring *br);

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
	struct xbd_throttle *t = __atomic_load_n(&br->disk->thr, __ATOMIC_ACQUIRE);
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
	if (!xbd_throttle_take(t, op, bytes, br->stop, *now, &due)) {
		if (!req->thr_since)
			req->thr_since = *now;
		br->throttled = true;
		br->throttle_due = due;
		return false;
	}
	req->thr_paid = true;
	if (req->thr_since) {
		XBD_STAT_INC(br->stats, throttled);
		XBD_STAT_ADD(br->stats, throttle_ns, *now - req->thr_since);
	}
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
static void submit_queued(struct xbd_bring *br)
{
	const struct xbd_engine *eng = br->disk->eng;
	/* xbdctl may change it at any time (control.c). */
	unsigned int max = __atomic_load_n(&br->disk->o.max_batch, __ATOMIC_RELAXED);
	uint64_t now = 0; /* the limits' clock read (throttle_pass) */

	br->throttled = false;
	while (br->submit_head) {
		struct bk_req *req = br->submit_head;
		struct xbd_io **ios = br->ios;
		/* max == 0 (engine default) submits at most 64 per call. */
		unsigned int n = 0, lim = max ? max : 64;
		int ret;

		if (br->inflight >= br->depth) {
			/* The engine's depth is used up: the rest waits for completions. */
			XBD_STAT_INC(br->stats, oo_req);
			return;
		}
		if (lim > br->depth - br->inflight)
			lim = br->depth - br->inflight;
		if (lim > br->nslots)
			lim = br->nslots;
		if (br->sync_io && lim > BK_SYNC_CHUNK)
			lim = BK_SYNC_CHUNK;
		if (req->io.op == XBD_IO_FLUSH || req->io.op == XBD_IO_DISCARD) {
			if (!throttle_pass(br, req, &now))
				return;
			ret = req->io.op == XBD_IO_FLUSH ? eng->flush(br->q, &req->io)
							 : eng->discard(br->q, &req->io);
			if (ret == -EAGAIN)
				return;
			if (ret < 0)
				complete(br, req, ret);
			else
				req_move(br, req, BK_INFLIGHT);
			continue;
		}
		for (; req && n < lim && (req->io.op == XBD_IO_READ || req->io.op == XBD_IO_WRITE);
		     req = req->next) {
			if (!throttle_pass(br, req, &now))
				break;
			ios[n++] = &req->io;
		}
		if (!n)
			return; /* the limits hold the head back (br->throttled) */
		ret = eng->submit(br->q, ios, n);
		if (ret == -EAGAIN || ret == 0)
			return; /* the kernel is full: retry after reaping */
		if (ret < 0) {
			/* The first iocb was refused: fail it alone and go on. */
			complete(br, br->submit_head, ret);
			continue;
		}
		xbd_stats_batch(br->stats, ret);
		while (ret--)
			req_move(br, br->submit_head, BK_INFLIGHT);
		/* Completions already there: the storage works inside io_submit. */
		br->sync_io = eng->queue_ready && eng->queue_ready(br->q);
		if (br->sync_io && br->submit_head && reap_all(br))
			push(br);
	}
}

/*
 * The request's next engine operation, now that its current one (its
 * step, or a barrier's drain) succeeded: true when it has one (req->step
 * and req->io say which), false when it is done.  ring.h's enum
 * bk_req_step says in what order.
 */
static bool step_next(struct xbd_bring *br, struct bk_req *req)
{
	enum bk_req_step step = req->step;

	if (req->state == BK_DRAINING) {
		/* Everything before the barrier has completed: its pre-flush. */
		if (br->disk->o.cache != XBD_CACHE_UNSAFE) {
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
static void complete(struct xbd_bring *br, struct bk_req *req, int result)
{
	if (!result && step_next(br, req)) {
		req_move(br, req, BK_QUEUED);
		return;
	}
	if (result) {
		io_failed(br, req, result);
		finish(br, req, req->r.operation == BLKIF_OP_DISCARD && result == -EOPNOTSUPP
				   ? BLKIF_RSP_EOPNOTSUPP : BLKIF_RSP_ERROR);
		return;
	}
	if (req->bounce && req->r.operation == BLKIF_OP_READ) {
		req_move(br, req, BK_COPYOUT);
		return;
	}
	finish(br, req, BLKIF_RSP_OKAY);
}

/* Collect completions in batches. */
static unsigned int reap_all(struct xbd_bring *br)
{
	struct xbd_io *done[REAP_MAX];
	unsigned int total = 0;
	int n, i;

	do {
		n = br->disk->eng->reap(br->q, done, REAP_MAX);
		XBD_STAT_INC(br->stats, reap_calls);
		if (n <= 0)
			break;
		XBD_STAT_ADD(br->stats, reaped, n);
		if (!total) {
			/* The wake-up's time only for what completed before it woke us. */
			if (!br->turn_ns || !br->turn_woke)
				br->turn_ns = ring_now(br);
			br->last_done_ns = br->turn_ns;
		}
		total += n;
		for (i = 0; i < n; i++)
			complete(br, done[i]->opaque, done[i]->result);
	} while (n == REAP_MAX);
	copy_out(br);
	return total;
}

/* Publish the written responses (journal.h, steps 6 to 9) and free their slots. */
static void push(struct xbd_bring *br)
{
	uint32_t prod = br->ring.rsp_prod_pvt;
	bool fresh = prod != br->ring.prod_pushed, notify;
	/* Stamped with the turn's latest clock read: a completion seen, or the consume. */
	uint64_t t = !br->lat.n ? 0 : br->turn_ns ? br->turn_ns : ring_now(br);
	struct bk_req *req;

	if (br->jr && fresh)
		xbd_journal_pushing(br->jr, prod);
	notify = xring_back_push(&br->ring);
	if (br->jr && fresh)
		xbd_journal_pushed(br->jr, prod);
	while ((req = br->answered_head))
		req_move(br, req, BK_FREE);
	if (notify) {
		XBD_STAT_INC(br->stats, notify_sent);
		xbd_evtchn_notify(br->evtchn, br->port);
	}
	if (t)
		xbd_lat_record(&br->lat, br->stats, t);
	br->turn_ns = 0;
	br->turn_woke = false;
}

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
	uint64_t n = (window_ns * 1000 + spin_ps - 1) / spin_ps;

	if (!clock_dear || n < POLL_CLOCK_SPINS)
		return POLL_CLOCK_SPINS;
	return n > 1u << 20 ? 1u << 20 : (unsigned int)n;
}

/* The polling settings, which xbdctl may change at any time (control.c). */
static uint64_t poll_max(const struct xbd_bring *br)
{
	return __atomic_load_n(&br->disk->o.poll_max_ns, __ATOMIC_RELAXED);
}

static void poll_adjust(struct xbd_bring *br, struct bk_poll *p, uint64_t block_ns, bool woke)
{
	const struct xbd_disk_opts *o = &br->disk->o;
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
static bool poll_for_work(struct xbd_bring *br)
{
	const struct xbd_engine *eng = br->disk->eng;
	uint64_t w = br->poll_ring.ns, t0, t, max = poll_max(br);
	unsigned int every;
	/* Held back by the disk's limits: new requests would only queue behind. */
	bool ring_ok = !br->stop && !br->failed && !br->barrier && !br->starved && !br->throttled;

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
			XBD_STAT_INC(br->stats, poll_hits);
			XBD_STAT_ADD(br->stats, poll_ns, t - t0);
			return true;
		}
		/* Completions are looked for in memory first: no syscall per spin. */
		if (br->inflight && (!eng->queue_ready || eng->queue_ready(br->q)) && reap_all(br)) {
			t = br->turn_ns;
			XBD_STAT_INC(br->stats, poll_hits);
			XBD_STAT_ADD(br->stats, poll_ns, t - t0);
			return true;
		}
		spin_pause();
		if (spin % every)
			continue;
		if (clock_dear) {
			t = br->clock_ns = t0 + (uint64_t)spin * spin_ps / 1000;
			br->clock_turn = true;
		} else {
			t = ring_now(br);
		}
		if (t - t0 >= w)
			break;
	}
	XBD_STAT_INC(br->stats, poll_misses);
	XBD_STAT_ADD(br->stats, poll_ns, t - t0);
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
	if (useful || br->stop || br->failed) {
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
	struct xbd_ring_seen *s = br->seen;
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
	const struct xbd_engine *eng = br->disk->eng;
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
		xbd_log_limited(&br->disk->crl, XBD_LOG_WARNING, "%s: waiting in the engine: %s",
				br->name, strerror(-err));
	if (ready & 1)
		ev[n++].data.u32 = 0;
	if (eng->queue_ready(br->q))
		ev[n++].data.u32 = 1;
	if (ready & 2)
		ev[n++].data.u32 = 2;
	return n;
}

/* Block on the event channel, the completion eventfd and the stop eventfd. */
static void wait_events(struct xbd_bring *br)
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
	__atomic_store_n(&br->seen->asleep_since, 0, __ATOMIC_RELAXED);
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
				XBD_STAT_INC(br->stats, notify_recv);
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
			br->stop = true;
		}
	}
	if (poll_max(br)) {
		poll_adjust(br, &br->poll_ring, block_ns, woke_ring);
		if (had_io)
			poll_adjust(br, &br->poll_io, block_ns, woke_io);
	}
}

static void *ring_main(void *arg)
{
	struct xbd_bring *br = arg;
	struct xbd_disk *disk = br->disk;

	pthread_once(&clock_once, clock_calibrate);
	if (br->cpu >= 0) {
		int err = xbd_ringcpu_pin_self(br->cpu);

		if (err)
			xbd_log_limited(&disk->crl, XBD_LOG_WARNING, "%s: cannot run on CPU %d: %s",
				br->name, br->cpu, strerror(-err));
	}

	/*
	 * A daemon killed between publishing responses and notifying left a
	 * frontend waiting for an event that never came: one now is harmless.
	 */
	if (br->resumed)
		xbd_evtchn_notify(br->evtchn, br->port);

	for (;;) {
		bool work = false;

		if (br->stop && xbd_ring_life(br) == XBD_RING_RUNNING) {
			unsigned int i;

			xbd_ring_set_life(br, XBD_RING_DRAINING);
			for (i = 0; i < br->nslots; i++)
				br->stop_inflight += br->slots[i].state != BK_FREE &&
						     br->slots[i].state != BK_ANSWERED;
			/* Its storage may hang: the control plane does not wait for it. */
			if (br->stop_inflight && !disk->host->stopping)
				xbd_log_limited(&disk->crl, XBD_LOG_INFO, "%s: I/O still in flight "
						"(%u requests): releasing the ring once it completes",
						br->name, br->stop_inflight);
		}
		br->lim.nr_sectors = __atomic_load_n(&disk->lim.nr_sectors, __ATOMIC_RELAXED);
		if (!br->stop && !br->failed && !br->barrier) {
			int n = consume(br);

			if (n < 0) {
				xbd_log_limited(&disk->crl, XBD_LOG_WARNING, "%s: frontend corrupted the ring (%s), disconnecting",
					br->name, strerror(-n));
				br->failed = true;
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
			complete(br, br->barrier, 0);
		submit_queued(br);
		if (br->inflight && reap_all(br))
			work = true;
		push(br);
		if (br->retired_head)
			grant_retire_due(br, false);
		if (work)
			continue;
		if ((br->stop || br->failed) && !br->inflight && !br->submit_head && !br->barrier)
			break;
		if (poll_for_work(br))
			continue;
		/* Starved: the requests wait for completions, which wake us. */
		if (!br->stop && !br->failed && !br->barrier && !br->starved &&
		    xring_back_final_check(&br->ring))
			continue;
		wait_events(br);
	}
	push(br);
	/* Nothing is in flight: the persistent grants go (after the grace). */
	xbd_ring_set_life(br, XBD_RING_RETIRING);
	grant_cache_clear(br);
	grant_retire_due(br, true);
	/* The main thread releases the ring once it sees this (asynchronous teardown). */
	xbd_ring_set_life(br, XBD_RING_EXITED);
	{
		uint64_t one = 1;

		if (write(disk->host->wake_fd, &one, sizeof(one)) < 0) {
			/* Counter already set: main wakes anyway. */
		}
	}
	return NULL;
}

/* ---- setup and teardown ---- */

static void ring_release(struct xbd_bring *br)
{
	struct xbd_platform *p = xbd_ring_plat(br);
	unsigned int i;

	grant_cache_clear(br);
	grant_retire_due(br, true);
	if (br->q)
		br->disk->eng->queue_close(br->q);
	br->q = NULL;
	if (br->evtchn) {
		if (br->port >= 0)
			xbd_evtchn_unbind(br->evtchn, br->port);
		xbd_evtchn_close(br->evtchn);
	}
	br->evtchn = NULL;
	if (br->evtchn_fd >= 0)
		close(br->evtchn_fd); /* never adopted: the start failed before */
	br->evtchn_fd = -1;
	if (br->sring)
		xbd_gnt_unmap(p, br->sring, br->nr_pages);
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

void xbd_ring_journal_id(const struct xbd_bring *br, struct xbd_journal_id *id)
{
	const struct xbd_disk *disk = br->disk;

	memset(id, 0, sizeof(*id));
	snprintf(id->type, sizeof(id->type), "%s", disk->type);
	id->domid = disk->domid;
	id->devid = disk->devid;
	id->queue = br->idx;
	id->nr_queues = disk->nr_rings;
	id->abi = disk->abi;
	id->nr_pages = br->nr_pages;
	id->remote_port = br->remote_port;
	id->nr_ents = xring_size(disk->abi, br->nr_pages);
	memcpy(id->refs, br->refs, br->nr_pages * sizeof(id->refs[0]));
}

/*
 * The ring's journal, mapped from the file the control plane handed over
 * (br->journal_fd): a fresh one, started here, or (br->resume) the one a
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
	br->nredo = 0;
	br->journal_err = 0;
	if (br->journal_fd < 0)
		return br->resume ? (br->journal_err = -ENOENT) : 0;
	xbd_ring_journal_id(br, &id);
	err = xbd_journal_map(br->journal_fd, &br->jr);
	if (err)
		return br->journal_err = err;
	if (!xbd_journal_matches(br->jr, &id))
		err = -ESTALE; /* the frontend has another ring now */
	else if (!br->resume)
		err = xbd_journal_start(br->jr, br->ring.rsp_prod_pvt);
	if (err || !br->resume) {
		if (err) {
			xbd_journal_close(br->jr);
			br->jr = NULL;
		}
		return br->journal_err = err;
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
		return br->journal_err = err;
	}
	/* Their slots are theirs again; the oldest runs first. */
	for (i = br->nslots, n = 0; i-- > 0;)
		if (redo[i])
			order[n++] = i;
	sort_by_seq(br, order, n);
	slots_init(br, redo, order, n);
	for (i = 0; i < n; i++) {
		struct bk_req *req = br->free;

		xbd_journal_get(&br->jr->ents[slot_index(br, req)], &req->r);
		req_move(br, req, BK_REDO);
	}
	br->nredo = n;
	br->resumed = true;
	free(redo);
	free(order);
	return 0;
}

void xbd_ring_init(struct xbd_bring *br, struct xbd_disk *disk, unsigned int idx)
{
	br->disk = disk;
	br->ops = &xbd_ring_local_ops;
	br->idx = idx;
	br->port = -1;
	br->epfd = br->stop_fd = -1;
	br->journal_fd = br->evtchn_fd = -1;
	br->cpu = -1;
	br->irq_tag[0] = '\0';
	br->stats = &br->own_stats;
	br->seen = &br->own_seen;
}

/* xbd_ring_local_ops.start: map, bind, allocate, and start the ring's thread. */
static int ring_start_here(struct xbd_bring *br)
{
	struct xbd_disk *disk = br->disk;
	struct xbd_platform *p = xbd_ring_plat(br);
	int16_t st[XBD_RING_MAX_PAGES];
	struct iovec *iovs;
	unsigned int i;
	int err;

	/* Kept when a worker is replaced: only a new connection picks again. */
	if (br->cpu < 0)
		br->cpu = xbd_ringcpu_pick();
	/* The disk's I/O limits, shared by its rings (and its group's disks), as it connects. */
	if (br->idx == 0)
		xbd_disk_throttle_update(disk);

	br->port = -1;
	br->masked_port = -1;
	br->epfd = br->stop_fd = -1;
	br->lim = disk->lim;
	br->gcache.max = XBD_MAX_PGRANTS;
	for (i = 0; i < br->nr_pages; i++)
		st[i] = GNTST_okay;
	br->sring = xbd_gnt_map(p, disk->domid, br->nr_pages, br->refs, true, st);
	if (!br->sring) {
		err = -errno;
		for (i = 0; i < br->nr_pages; i++)
			if (st[i] != GNTST_okay)
				break;
		xbd_log_limited(&disk->crl, XBD_LOG_WARNING, "%s: cannot map the ring (ring-ref %u, status %d)",
			br->name, br->refs[i < br->nr_pages ? i : 0],
			i < br->nr_pages ? st[i] : 0);
		return err ? err : -EIO;
	}
	err = xring_attach(&br->ring, br->sring, br->nr_pages, disk->abi, XRING_BACK);
	if (err)
		goto fail;
	if (br->evtchn_fd >= 0) {
		/* Opened for us (restricted to the frontend's domain, where Linux can). */
		err = xbd_evtchn_adopt(p, br->evtchn_fd, &br->evtchn);
		br->evtchn_fd = -1;
	} else {
		char saved[XBD_RINGCPU_TAG_LEN];

		xbd_ringcpu_tag(br->irq_tag, saved);
		err = xbd_evtchn_open(p, &br->evtchn);
		xbd_ringcpu_untag(br->irq_tag, saved);
	}
	if (err)
		goto fail;
	err = xbd_evtchn_bind_interdomain(br->evtchn, disk->domid, br->remote_port);
	if (err < 0) {
		xbd_log_limited(&disk->crl, XBD_LOG_WARNING, "%s: cannot bind event channel %u: %s", br->name,
			br->remote_port, strerror(-err));
		goto fail;
	}
	br->port = err;
	br->nslots = br->ring.nr_ents;
	/* What validation lets through: 11 direct, or the indirect limit offered. */
	br->segmax = br->lim.max_indirect_segs > BLKIF_MAX_SEGMENTS_PER_REQUEST
			     ? br->lim.max_indirect_segs : BLKIF_MAX_SEGMENTS_PER_REQUEST;
	if (br->segmax > XBD_MAX_SEGS)
		br->segmax = XBD_MAX_SEGS;
	err = -ENOMEM;
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
		goto fail;
	}
	for (i = 0; i < br->nslots; i++)
		br->slots[i].iov = iovs + (size_t)i * br->segmax;
	err = ring_journal(br);
	if (err)
		goto fail;
	br->depth = br->nslots + 1 < BK_QUEUE_DEPTH ? br->nslots + 1 : BK_QUEUE_DEPTH;
	err = disk->eng->queue_open(disk->store, br->depth, &br->q);
	if (err)
		goto fail;
	if (disk->eng->queue_depth && disk->eng->queue_depth(br->q) < br->depth)
		br->depth = disk->eng->queue_depth(br->q);
	/* The bounce pool outlives the queue (ring_release frees it later). */
	if (br->bpool && disk->eng->queue_buffers)
		disk->eng->queue_buffers(br->q, br->bpool, (size_t)BK_BOUNCE_PAGES * XBD_PAGE_SIZE);
	if (!br->depth)
		br->depth = 1;
	if (disk->o.max_batch > br->depth)
		xbd_log_limited(&disk->crl, XBD_LOG_VERBOSE, "%s: max-batch %u is more than the queue depth: "
			"batches of at most %u", br->name, disk->o.max_batch, br->depth);
	br->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	br->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (br->stop_fd < 0 || br->epfd < 0) {
		err = -errno;
		goto fail;
	}
	err = add_fd(br->epfd, xbd_evtchn_fd(br->evtchn), 0, 0);
	/* Edge-triggered where the engine allows: its eventfd is then never read. */
	if (!err)
		err = add_fd(br->epfd, disk->eng->queue_fd(br->q), 1,
			     disk->eng->queue_edge ? EPOLLET : 0);
	if (!err && disk->eng->queue_edge)
		disk->eng->queue_edge(br->q);
	if (!err)
		err = add_fd(br->epfd, br->stop_fd, 2, 0);
	if (err)
		goto fail;
	/* Running before the thread is: it may reach its end before we look again. */
	xbd_ring_set_life(br, XBD_RING_RUNNING);
	err = -pthread_create(&br->thread, NULL, ring_main, br);
	if (err) {
		xbd_ring_set_life(br, XBD_RING_IDLE);
		goto fail;
	}
	xbd_ringcpu_place_irq(br->name, br->cpu, br->irq_tag);
	return 0;
fail:
	ring_release(br);
	return err;
}

/*
 * After the thread stopped: every request it consumed must have been
 * answered (its slot is free).  Requests the frontend queued that we never
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
	left = br->failed ? 0 : xring_back_pending(&br->ring);
	br->stop_busy = busy;
	br->stop_left = left < 0 ? 0 : left;
	if (busy)
		xbd_log_limited(&br->disk->crl, XBD_LOG_WARNING, "%s: stopped with %u consumed requests NOT answered",
			br->name, busy);
	else if (br->disk->host->stopping)
		xbd_log_limited(&br->disk->crl, XBD_LOG_INFO, "%s: stopped: every consumed request answered "
			"(%u in flight at the stop), %d left in the ring for the next backend",
			br->name, br->stop_inflight, left < 0 ? 0 : left);
}

/* xbd_ring_local_ops.request_stop */
static void ring_request_stop_here(struct xbd_bring *br)
{
	uint64_t one = 1;

	if (!br->disk || xbd_ring_life(br) == XBD_RING_IDLE || br->stop)
		return;
	/* Seen at the top of the loop even by a thread that never sleeps. */
	br->stop = true;
	if (write(br->stop_fd, &one, sizeof(one)) < 0) {
		/* Counter already set. */
	}
}

/* xbd_ring_local_ops.stop: join the thread (bounded at SIGTERM) and release the ring. */
static void ring_stop_here(struct xbd_bring *br)
{
	if (!br->disk)
		return; /* never set up */
	xbd_ringcpu_put(br->cpu);
	br->cpu = -1;
	if (xbd_ring_life(br) != XBD_RING_IDLE) {
		uint64_t deadline = br->disk->host->stop_deadline_ms;

		xbd_ring_request_stop(br);
		/*
		 * SIGTERM: joined once it has answered what it took, but never
		 * past the deadline.  A ring whose storage still has its requests
		 * then is left as it is, thread and all, to its journal: the
		 * daemon ends as if killed (main.c), and the next one executes
		 * them again, so the guest keeps its disk.
		 */
		while (deadline && !xbd_ring_exited(br) && xbd_mono_ns() / 1000000u < deadline)
			usleep(2000);
		if (deadline && !xbd_ring_exited(br)) {
			xbd_log_limited(&br->disk->crl, XBD_LOG_WARNING, "%s: its storage still has "
					"requests at the stop deadline: left to its journal, as if "
					"killed (the next xbd-back executes them again)", br->name);
			br->abandoned = true;
			br->disk->unclean = true;
			br->disk->host->abandoned = true;
			return;
		}
		pthread_join(br->thread, NULL);
		xbd_ring_set_life(br, XBD_RING_IDLE);
		stop_report(br);
		if (xbd_log_level() >= XBD_LOG_DEBUG)
			xbd_stats_print(stderr, br->name, br->stats);
	}
	ring_release(br);
}

const struct xbd_ring_ops xbd_ring_local_ops = {
	.start = ring_start_here,
	.request_stop = ring_request_stop_here,
	.stop = ring_stop_here,
};
