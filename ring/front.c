/*
 * front.c: the frontend's end of a blkif ring: serialise requests in the
 * ring's ABI, publish them with notification suppression, and consume
 * responses (each shared field read once; the backend is not trusted).
 */
#include <errno.h>
#include <string.h>

#include "ring/ring.h"
#include "ring/wire.h"

unsigned int xring_front_free(const struct xring *r)
{
	uint32_t used = r->req_prod_pvt - r->rsp_cons;

	return used >= r->nr_ents ? 0 : r->nr_ents - used;
}

static void put_segments(volatile uint8_t *base, size_t off, const struct xbd_seg *seg,
			 unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		size_t s = off + i * XBD_SEG_SIZE;

		xbd_st32(base, s + XBD_SEG_OFF_GREF, seg[i].gref);
		xbd_st8(base, s + XBD_SEG_OFF_FIRST, seg[i].first_sect);
		xbd_st8(base, s + XBD_SEG_OFF_LAST, seg[i].last_sect);
	}
}

int xring_front_put_request(struct xring *r, const struct xbd_request *req)
{
	const struct xbd_abi_layout *l = xbd_abi_layout(r->abi);
	volatile uint8_t *e;
	size_t i;

	/*
	 * Malformed requests (bad ops, zero or out-of-range segments) are
	 * let through on purpose: conformance checks send them to see the
	 * backend refuse them.  Only what the wire cannot carry is refused.
	 */
	if (req->indirect) {
		if (req->nr_segments > BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST *
					       XBD_SEGS_PER_INDIRECT_PAGE)
			return -EINVAL;
	} else if (req->operation == BLKIF_OP_INDIRECT) {
		/* The op byte alone would say "indirect layout": ask for it explicitly. */
		return -EINVAL;
	} else if (req->operation != BLKIF_OP_DISCARD &&
		   req->nr_segments > BLKIF_MAX_SEGMENTS_PER_REQUEST) {
		return -EINVAL;
	}
	if (xring_front_free(r) == 0)
		return -ENOSPC;

	e = xbd_entry(r, r->req_prod_pvt);
	/*
	 * No stale bytes from an earlier response in the padding.  A plain
	 * memset is fine here: this is our own write, and the release store
	 * of req_prod in xring_front_push() orders it before the peer looks.
	 */
	memset((void *)e, 0, r->ent_size);

	if (req->indirect) {
		xbd_st8(e, XBD_REQ_OFF_OP, BLKIF_OP_INDIRECT);
		xbd_st8(e, l->ind_op, req->operation);
		xbd_st16(e, l->ind_nr_segments, req->nr_segments);
		xbd_st64(e, l->ind_id, req->id);
		xbd_st64(e, l->ind_sector, req->sector_number);
		xbd_st16(e, l->ind_handle, req->handle);
		for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
			xbd_st32(e, l->ind_grefs + 4 * i, req->indirect_grefs[i]);
	} else if (req->operation == BLKIF_OP_DISCARD) {
		xbd_st8(e, XBD_REQ_OFF_OP, BLKIF_OP_DISCARD);
		xbd_st8(e, l->discard_flag, req->discard_flags);
		xbd_st16(e, l->discard_handle, req->handle);
		xbd_st64(e, l->discard_id, req->id);
		xbd_st64(e, l->discard_sector, req->sector_number);
		xbd_st64(e, l->discard_nr_sectors, req->nr_sectors);
	} else {
		xbd_st8(e, XBD_REQ_OFF_OP, req->operation);
		xbd_st8(e, l->rw_nr_segments, (uint8_t)req->nr_segments);
		xbd_st16(e, l->rw_handle, req->handle);
		xbd_st64(e, l->rw_id, req->id);
		xbd_st64(e, l->rw_sector, req->sector_number);
		put_segments(e, l->rw_seg, req->seg, req->nr_segments);
	}
	r->req_prod_pvt++;
	return 0;
}

int xring_front_fill_indirect(const struct xbd_request *req, void *const *pages)
{
	unsigned int i, n = req->nr_segments;

	if (n > XBD_MAX_SEGS || XBD_INDIRECT_PAGES(n) > BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST)
		return -EINVAL;
	for (i = 0; i < XBD_INDIRECT_PAGES(n); i++) {
		unsigned int first = i * XBD_SEGS_PER_INDIRECT_PAGE;
		unsigned int count = n - first < XBD_SEGS_PER_INDIRECT_PAGE
					     ? n - first : XBD_SEGS_PER_INDIRECT_PAGE;

		/* Unused entries zeroed: the page may be granted to the backend as is. */
		memset(pages[i], 0, XBD_PAGE_SIZE);
		put_segments(pages[i], 0, req->seg + first, count);
	}
	return 0;
}

bool xring_front_push(struct xring *r)
{
	uint32_t old = r->prod_pushed;
	uint32_t new = r->req_prod_pvt;
	uint32_t event;

	xbd_idx_release(r, XBD_SRING_REQ_PROD, new);
	/* The backend must see the new req_prod before we read req_event. */
	xbd_full_barrier();
	event = xbd_idx_load(r, XBD_SRING_REQ_EVENT);
	r->prod_pushed = new;
	return (uint32_t)(new - event) < (uint32_t)(new - old);
}

/* Responses published and not consumed, or -EPROTO for impossible counts. */
static int front_pending(struct xring *r)
{
	uint32_t rsp_prod = xbd_idx_acquire(r, XBD_SRING_RSP_PROD);
	uint32_t avail = rsp_prod - r->rsp_cons;

	/* Never more responses than requests we published and await. */
	if (avail > r->prod_pushed - r->rsp_cons)
		return -EPROTO;
	return (int)avail;
}

int xring_front_consume(struct xring *r, struct xbd_response *out, unsigned int max)
{
	const struct xbd_abi_layout *l = xbd_abi_layout(r->abi);
	int pending = front_pending(r);
	unsigned int i, n;

	if (pending < 0)
		return pending;
	n = (unsigned int)pending < max ? (unsigned int)pending : max;
	for (i = 0; i < n; i++) {
		const volatile uint8_t *e = xbd_entry(r, r->rsp_cons);

		out[i].id = xbd_ld64(e, l->rsp_id);
		out[i].operation = xbd_ld8(e, l->rsp_op);
		out[i].status = (int16_t)xbd_ld16(e, l->rsp_status);
		r->rsp_cons++;
	}
	return (int)n;
}

bool xring_front_final_check(struct xring *r)
{
	if (front_pending(r) != 0)
		return true;
	xbd_idx_store(r, XBD_SRING_RSP_EVENT, r->rsp_cons + 1);
	xbd_full_barrier();
	return front_pending(r) != 0;
}
