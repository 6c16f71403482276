/*
 * requests.c: a request's life in a ring served here (ring-thread.h): its
 * moves (req_move, the one place its state changes, checked against one
 * table, with the journal's entry), and its end: the answer (req_respond,
 * the one place a request ends), a refusal, a grant that failed, the
 * release of its grants before it is answered; and the test builds' crash
 * points.  ring-round.c takes requests through a round.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/datapath/ring-thread.h"
#include "blkback/datapath/throttle.h"

/* ---- test-only crash points (--enable-test-hooks; never in a production build) ---- */

#ifdef XBD_TEST_HOOKS
/*
 * XBD_TEST_CRASH=POINT[:N]: the process kills itself with SIGKILL the Nth
 * time (1 by default) any ring thread reaches POINT, so that the crash
 * tests can choose the instant (tests/robust/crash-points.sh); the main
 * process of workers dies with a worker killed so.
 * XBD_TEST_CRASH_WORKER=POINT[:N] counts only rings that are not a
 * resume: a worker dies there, the main process (which does not follow,
 * supervisor.c) starts a successor, and the successor, which resumes, runs
 * on (tests/robust/workers-crash-points.sh).
 */
void ring_crash_point(const struct xbd_bring *br, const char *point)
{
	static uint64_t hits;
	const char *spec = getenv("XBD_TEST_CRASH");
	size_t len = strlen(point);
	unsigned long nth = 1;

	if (!spec && !br->base.p.resume)
		spec = getenv("XBD_TEST_CRASH_WORKER");
	if (!spec || strncmp(spec, point, len) || (spec[len] && spec[len] != ':'))
		return;
	if (spec[len] == ':')
		nth = strtoul(spec + len + 1, NULL, 10);
	if (__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED) == nth)
		raise(SIGKILL);
}
#endif

/* ---- a request's life (ring-thread.h: enum bk_req_state) ---- */

unsigned int req_slot(const struct xbd_bring *br, const struct bk_req *req)
{
	return (unsigned int)(req - br->slots);
}

#define BK_S(state) (1u << (state))
/* The states each state may be entered from (ring-thread.h says why). */
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
 * A move ring-thread.h does not allow, or a request taken off a list it does
 * not head: a bug here, said once in a line (and fatal in a build with
 * test hooks, so that the tests catch it).
 */
static void req_bug(struct xbd_bring *br, struct bk_req *req, enum bk_req_state to)
{
	static bool said;

	if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		xbd_log(XBD_LOG_ERR, "%s: request slot %u went from %s to %s (a bug in xbd-back)",
			br->base.name, req_slot(br, req), req_state_names[req->state], req_state_names[to]);
#ifdef XBD_TEST_HOOKS
	abort();
#endif
}

/*
 * The one place a request's state changes: off the list of its old state
 * (at its head), onto the list of the new one, and the journal's entry
 * with it (journal.h: taken at step 2, answered at step 4, free at step 9).
 */
void req_move(struct xbd_bring *br, struct bk_req *req, enum bk_req_state to)
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
			xbd_journal_free(br->jr, req_slot(br, req));
		break;
	case BK_TAKEN:
		/* In the journal before any response can overwrite its ring slot. */
		if (from == BK_FREE && br->jr)
			xbd_journal_take(br->jr, req_slot(br, req), br->ring.req_cons - 1, &req->r);
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
			xbd_journal_answer(br->jr, req_slot(br, req), br->ring.rsp_prod_pvt);
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
bool req_answered(const struct bk_req *req)
{
	return req->state == BK_ANSWERED;
}

/* ---- responses ---- */

/*
 * Answer the request: the one place a request ends.  The response is
 * written field by field (ring-thread.h), after the journal says so (journal.h,
 * step 4); the slot waits for ring_push() before it is reused.
 */
void req_respond(struct xbd_bring *br, struct bk_req *req, int16_t status)
{
	req_move(br, req, BK_ANSWERED);
	/* A counted write is out no more (its data is where it goes): a checkpoint may pass. */
	cbt_done(br, req);
	CRASH_POINT(br, "answered");
	xring_back_put_response(&br->ring, req->r.id, req->r.operation, status);
	CRASH_POINT(br, "responded");
	if (req->consumed_ns)
		xbd_lat_note(&br->lat, br->base.stats, req->r.operation, req->consumed_ns);
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

void req_reject(struct xbd_bring *br, struct bk_req *req, enum xbd_req_error e)
{
	XBD_STAT_INC(br->base.stats, errors[e]);
	xbd_log_limited(&br->base.disk->rl, XBD_LOG_WARNING,
			"%s: request refused: %s (op %u, sector %" PRIu64 ", %u segments)",
			br->base.name, xbd_req_strerror(e), req->r.raw_operation,
			req->r.sector_number, req->r.nr_segments);
	req_respond(br, req, xbd_req_error_status(e));
}

void req_grant_fail(struct xbd_bring *br, struct bk_req *req, uint32_t ref, int st)
{
	XBD_STAT_INC(br->base.stats, grant_errors);
	xbd_log_limited(&br->base.disk->rl, XBD_LOG_WARNING, "%s: request refused: grant %u not usable (status %d)",
			br->base.name, ref, st);
	req_respond(br, req, BLKIF_RSP_ERROR);
}

/* Release the request's grants; answer it now, or once its batch map is unmapped. */
void req_finish(struct xbd_bring *br, struct bk_req *req, int16_t status)
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
		req_respond(br, req, status);
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
	XBD_STAT_INC(br->base.stats, grant_unmap_calls);
	while (rg->finished) {
		struct bk_req *r = rg->finished;

		req_respond(br, r, r->status);
		r->region = NULL;
	}
	free(rg);
}
