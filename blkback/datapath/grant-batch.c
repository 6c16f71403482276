/*
 * grant-batch.c: a consumed batch's grants (consume's third step,
 * ring-round.c): the indirect pages copied in with one call, then the data
 * pages of every request mapped with one call per direction, or through
 * the persistent-grant cache with the misses mapped in one call
 * (grant-cache.c), or copied to and from the ring's bounce pages with one
 * call each way (grant copy).  A failed batch call is retried request by
 * request, so that only requests with a bad grant fail.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/datapath/ring-thread.h"

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
void grants_load_indirect(struct xbd_bring *br, struct bk_req **batch, unsigned int nb)
{
	struct xbd_gnt_copy_seg *cs = br->cseg;
	unsigned int i, p, n = 0;
	int ret;

	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];

		if (req_answered(req) || !req->r.indirect)
			continue;
		if (!req->ind) {
			req->ind = aligned_alloc(XBD_PAGE_SIZE,
						 XBD_MAX_INDIRECT_PAGES * XBD_PAGE_SIZE);
			if (!req->ind) {
				req_respond(br, req, BLKIF_RSP_ERROR);
				continue;
			}
		}
		for (p = 0; p < req->r.nr_indirect_pages; p++) {
			cs[n].local = (char *)req->ind + p * XBD_PAGE_SIZE;
			cs[n].domid = br->base.disk->domid;
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
	XBD_STAT_INC(br->base.stats, grant_copy_calls);
	ret = xbd_gnt_copy(xbd_ring_plat(br), n, cs);
	n = 0;
	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];
		const void *pages[XBD_MAX_INDIRECT_PAGES];
		bool ok;
		uint32_t bad_ref;
		int bad_st;

		if (req_answered(req) || !req->r.indirect)
			continue;
		ok = copy_segs_ok(cs, n, req->r.nr_indirect_pages, ret, &bad_ref, &bad_st);
		n += req->r.nr_indirect_pages;
		for (p = 0; p < req->r.nr_indirect_pages; p++)
			pages[p] = (char *)req->ind + p * XBD_PAGE_SIZE;
		if (!ok) {
			req_grant_fail(br, req, bad_ref, bad_st);
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
	XBD_STAT_INC(br->base.stats, grant_map_calls);
	addr = xbd_gnt_map(xbd_ring_plat(br), br->base.disk->domid, n, br->mrefs, writable, br->mstatus);
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
		req_grant_fail(br, req, ref, st);
		return;
	}
	rg = calloc(1, sizeof(*rg));
	if (!rg) {
		xbd_gnt_unmap(xbd_ring_plat(br), addr, n);
		req_respond(br, req, BLKIF_RSP_ERROR);
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

		if (req_answered(req) || !needs_grants(req) || (req->r.operation == BLKIF_OP_READ) != reads)
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
	XBD_STAT_INC(br->base.stats, grant_map_calls);
	addr = xbd_gnt_map(xbd_ring_plat(br), br->base.disk->domid, n, br->mrefs, reads, br->mstatus);
	rg = addr ? calloc(1, sizeof(*rg)) : NULL;
	if (addr && !rg) {
		xbd_gnt_unmap(xbd_ring_plat(br), addr, n);
		addr = NULL;
	}
	n = 0;
	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];

		if (req_answered(req) || !needs_grants(req) || (req->r.operation == BLKIF_OP_READ) != reads)
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

		if (req_answered(req) || !needs_grants(req))
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
		XBD_STAT_INC(br->base.stats, grant_map_calls);
		addr = xbd_gnt_map(xbd_ring_plat(br), br->base.disk->domid, n, br->mrefs, true, br->mstatus);
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

		if (req_answered(req) || !needs_grants(req))
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
				XBD_STAT_INC(br->base.stats, persistent_misses);
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
			req_grant_fail(br, req, bad_ref, bad_st);
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
		cs[n].domid = br->base.disk->domid;
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

		if (req_answered(req) || !needs_grants(req))
			continue;
		/* ring_consume() stopped before the pool could run short. */
		if (!br->bpool || br->bpool_nfree < req->r.nr_segments) {
			req_respond(br, req, BLKIF_RSP_ERROR);
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
	XBD_STAT_INC(br->base.stats, grant_copy_calls);
	ret = xbd_gnt_copy(xbd_ring_plat(br), n, cs);
	n = 0;
	for (i = 0; i < nb; i++) {
		struct bk_req *req = batch[i];
		uint32_t ref;
		int st;

		if (req_answered(req) || !needs_grants(req) || req->r.operation == BLKIF_OP_READ)
			continue;
		n += req->r.nr_segments;
		if (!copy_segs_ok(cs, n - req->r.nr_segments, req->r.nr_segments, ret, &ref, &st)) {
			req_grant_fail(br, req, ref, st);
		}
	}
}

/*
 * Grant copy: read data copied out to the guest for every finished read
 * (BK_COPYOUT), one call for up to BK_BATCH_SEGS segments (the size of
 * cseg), from the list's head; a call more for the rest.
 */
void grants_copy_out(struct xbd_bring *br)
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
		XBD_STAT_INC(br->base.stats, grant_copy_calls);
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
				req_finish(br, req, BLKIF_RSP_OKAY);
			else
				req_grant_fail(br, req, ref, st);
		}
	}
}

/* consume, step 3 (grants): the batch's data pages, copied in, or mapped (persistently or per batch). */
void grants_batch(struct xbd_bring *br, struct bk_req **batch, unsigned int nb)
{
	if (br->base.disk->copy) {
		copy_in(br, batch, nb);
	} else if (br->base.disk->persistent) {
		map_persistent(br, batch, nb);
	} else {
		map_batch(br, batch, nb, true);
		map_batch(br, batch, nb, false);
	}
}
