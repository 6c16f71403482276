/*
 * back.c: the backend's end of a blkif ring: consume requests (one private
 * copy per request, every shared field read once), write responses field
 * by field, and publish them with notification suppression.
 */
#include <errno.h>
#include <string.h>

#include "ring/ring.h"
#include "ring/wire.h"

int xring_back_pending(struct xring *r)
{
	/* One load; the acquire orders every entry read after it. */
	uint32_t req_prod = xbd_idx_acquire(r, XBD_SRING_REQ_PROD);
	uint32_t unconsumed = req_prod - r->req_cons;

	/*
	 * Both differences are modulo 2^32, so they stay right across the
	 * wrap.  A producer index behind req_cons also lands here as a huge
	 * difference.  Requests in flight (consumed, unanswered) occupy
	 * slots too, hence the check against rsp_prod_pvt
	 * (RING_REQUEST_PROD_OVERFLOW).
	 */
	if (unconsumed > r->nr_ents || req_prod - r->rsp_prod_pvt > r->nr_ents)
		return -EPROTO;
	return (int)unconsumed;
}

/* Copy one request entry into the internal form. */
static void copy_request(const struct xbd_abi_layout *l, const volatile uint8_t *e,
			 struct xbd_request *q)
{
	uint8_t op = xbd_ld8(e, XBD_REQ_OFF_OP);
	unsigned int i, n;

	q->raw_operation = op;
	q->operation = op;
	q->indirect = false;
	q->discard_flags = 0;
	q->nr_sectors = 0;
	q->nr_indirect_pages = 0;
	memset(q->indirect_grefs, 0, sizeof(q->indirect_grefs));

	switch (op) {
	case BLKIF_OP_DISCARD:
		q->discard_flags = xbd_ld8(e, l->discard_flag);
		q->handle = xbd_ld16(e, l->discard_handle);
		q->id = xbd_ld64(e, l->discard_id);
		q->sector_number = xbd_ld64(e, l->discard_sector);
		q->nr_sectors = xbd_ld64(e, l->discard_nr_sectors);
		q->nr_segments = 0;
		break;
	case BLKIF_OP_INDIRECT:
		/* Segments live in the indirect pages: xbd_req_load_indirect(). */
		q->indirect = true;
		q->operation = xbd_ld8(e, l->ind_op);
		q->nr_segments = xbd_ld16(e, l->ind_nr_segments);
		q->id = xbd_ld64(e, l->ind_id);
		q->sector_number = xbd_ld64(e, l->ind_sector);
		q->handle = xbd_ld16(e, l->ind_handle);
		for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
			q->indirect_grefs[i] = xbd_ld32(e, l->ind_grefs + 4 * i);
		break;
	default:
		/*
		 * Read, write, barrier, flush; unknown ops take the same
		 * layout so that their id can be echoed in the error response.
		 */
		q->nr_segments = xbd_ld8(e, l->rw_nr_segments);
		q->handle = xbd_ld16(e, l->rw_handle);
		q->id = xbd_ld64(e, l->rw_id);
		q->sector_number = xbd_ld64(e, l->rw_sector);
		/* Only the segments claimed, and never more than the entry has. */
		n = q->nr_segments;
		if (n > BLKIF_MAX_SEGMENTS_PER_REQUEST)
			n = BLKIF_MAX_SEGMENTS_PER_REQUEST;
		for (i = 0; i < n; i++) {
			size_t s = l->rw_seg + i * XBD_SEG_SIZE;

			q->seg[i].gref = xbd_ld32(e, s + XBD_SEG_OFF_GREF);
			q->seg[i].first_sect = xbd_ld8(e, s + XBD_SEG_OFF_FIRST);
			q->seg[i].last_sect = xbd_ld8(e, s + XBD_SEG_OFF_LAST);
		}
		break;
	}
}

int xring_back_consume(struct xring *r, struct xbd_request *out, unsigned int max)
{
	const struct xbd_abi_layout *l = xbd_abi_layout(r->abi);
	int pending = xring_back_pending(r);
	unsigned int i, n;

	if (pending < 0)
		return pending;
	n = (unsigned int)pending < max ? (unsigned int)pending : max;
	for (i = 0; i < n; i++) {
		copy_request(l, xbd_entry(r, r->req_cons), &out[i]);
		r->req_cons++;
	}
	return (int)n;
}

void xring_back_put_response(struct xring *r, uint64_t id, uint8_t operation,
			     int16_t status)
{
	const struct xbd_abi_layout *l = xbd_abi_layout(r->abi);
	volatile uint8_t *e = xbd_entry(r, r->rsp_prod_pvt);

	xbd_st64(e, l->rsp_id, id);
	xbd_st8(e, l->rsp_op, operation);
	xbd_st16(e, l->rsp_status, (uint16_t)status);
	r->rsp_prod_pvt++;
}

bool xring_back_push(struct xring *r)
{
	uint32_t old = r->prod_pushed;
	uint32_t new = r->rsp_prod_pvt;
	uint32_t event;

	xbd_idx_release(r, XBD_SRING_RSP_PROD, new);
	/* The frontend must see the new rsp_prod before we read rsp_event. */
	xbd_full_barrier();
	event = xbd_idx_load(r, XBD_SRING_RSP_EVENT);
	r->prod_pushed = new;
	/* Notify iff rsp_event lies in (old, new]: the frontend waits for it. */
	return (uint32_t)(new - event) < (uint32_t)(new - old);
}

bool xring_back_final_check(struct xring *r)
{
	/* A corrupt ring counts as work: the caller's consume reports it. */
	if (xring_back_pending(r) != 0)
		return true;
	xbd_idx_store(r, XBD_SRING_REQ_EVENT, r->req_cons + 1);
	/* Publish req_event before looking at req_prod again. */
	xbd_full_barrier();
	return xring_back_pending(r) != 0;
}

int xring_back_resume(struct xring *r, uint32_t req_cons)
{
	if (req_cons - r->rsp_prod_pvt > r->nr_ents)
		return -EINVAL;
	r->req_cons = req_cons;
	return 0;
}

uint32_t xring_back_req_prod(struct xring *r)
{
	return xbd_idx_acquire(r, XBD_SRING_REQ_PROD);
}
