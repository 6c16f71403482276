/*
 * ring.c: setting up one end's view of a shared blkif ring: initialising
 * the shared header (frontend) and attaching either side to mapped pages.
 */
#include <errno.h>
#include <string.h>

#include "ring/ring.h"
#include "ring/wire.h"

void xring_init_shared(void *sring, unsigned int nr_pages)
{
	memset(sring, 0, (size_t)nr_pages * XBD_PAGE_SIZE);
	/* SHARED_RING_INIT: ask for a notification on the very first entry. */
	*(uint32_t *)((uint8_t *)sring + XBD_SRING_REQ_EVENT) = 1;
	*(uint32_t *)((uint8_t *)sring + XBD_SRING_RSP_EVENT) = 1;
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static bool valid_page_count(unsigned int nr_pages)
{
	return nr_pages >= 1 && nr_pages <= XBD_RING_MAX_PAGES &&
	       (nr_pages & (nr_pages - 1)) == 0;
}

int xring_attach(struct xring *r, void *sring, unsigned int nr_pages,
		 enum xbd_abi abi, enum xring_side side)
{
	if (sring == NULL || !valid_page_count(nr_pages))
		return -EINVAL;
	if (abi != XBD_ABI_NATIVE && abi != XBD_ABI_X86_32 && abi != XBD_ABI_X86_64)
		return -EINVAL;
	if (side != XRING_BACK && side != XRING_FRONT)
		return -EINVAL;

	memset(r, 0, sizeof(*r));
	r->sring = sring;
	r->nr_pages = nr_pages;
	r->abi = abi;
	r->side = side;
	r->ent_size = xbd_abi_layout(abi)->ent_size;
	r->nr_ents = xring_size(abi, nr_pages);

	if (side == XRING_BACK) {
		/*
		 * Resume after the last published response: anything
		 * consumed but unanswered by a previous backend is consumed
		 * again.  A hostile rsp_prod here only makes the ring look
		 * corrupt to xring_back_pending(); it cannot reach outside it.
		 */
		uint32_t rsp_prod = xbd_idx_acquire(r, XBD_SRING_RSP_PROD);

		r->req_cons = rsp_prod;
		r->rsp_prod_pvt = rsp_prod;
		r->prod_pushed = rsp_prod;
	} else {
		uint32_t req_prod = xbd_idx_acquire(r, XBD_SRING_REQ_PROD);
		uint32_t rsp_prod = xbd_idx_acquire(r, XBD_SRING_RSP_PROD);

		r->req_prod_pvt = req_prod;
		r->prod_pushed = req_prod;
		r->rsp_cons = rsp_prod;
	}
	return 0;
}

void xring_read_shared(const struct xring *r, struct xring_shared_idx *out)
{
	out->req_prod = xbd_idx_load(r, XBD_SRING_REQ_PROD);
	out->req_event = xbd_idx_load(r, XBD_SRING_REQ_EVENT);
	out->rsp_prod = xbd_idx_load(r, XBD_SRING_RSP_PROD);
	out->rsp_event = xbd_idx_load(r, XBD_SRING_RSP_EVENT);
}
