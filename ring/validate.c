/*
 * validate.c: decide whether a copied request may be executed, against
 * what the backend offers the device (struct xbd_limits), and say why not.
 *
 * Everything here works on the private copy made by xring_back_consume(),
 * except xbd_req_load_indirect(), which makes the private copy of the
 * segments held in indirect pages (each read once).
 */
#include <errno.h>

#include "ring/ring.h"
#include "ring/wire.h"

/* Sectors (512 bytes) per page: a segment's last_sect is at most this - 1. */
#define SECTORS_PER_PAGE (XBD_PAGE_SIZE >> XBD_SECTOR_SHIFT)

static const char *const req_messages[XBD_REQ_NR_ERRORS] = {
	[XBD_REQ_OK] = "ok",
	[XBD_REQ_BAD_OP] = "unknown operation",
	[XBD_REQ_UNSUPPORTED] = "operation not offered by this device",
	[XBD_REQ_READONLY] = "write to a read-only device",
	[XBD_REQ_BAD_NR_SEGS] = "bad segment count",
	[XBD_REQ_BAD_INDIRECT_OP] = "indirect request wraps an operation other than read or write",
	[XBD_REQ_TOO_MANY_INDIRECT] = "more indirect segments than advertised",
	[XBD_REQ_BAD_SECTORS] = "segment with first_sect > last_sect or last_sect > 7",
	[XBD_REQ_MISALIGNED] = "offset or length not a multiple of sector-size",
	[XBD_REQ_BEYOND_END] = "sector range beyond end of disk",
	[XBD_REQ_BAD_DISCARD] = "discard of zero sectors or with unknown flags",
};

const char *xbd_req_strerror(enum xbd_req_error e)
{
	if ((unsigned int)e >= XBD_REQ_NR_ERRORS)
		return "unknown request error";
	return req_messages[e];
}

int16_t xbd_req_error_status(enum xbd_req_error e)
{
	if (e == XBD_REQ_OK)
		return BLKIF_RSP_OKAY;
	/* blkif.h: EOPNOTSUPP is the answer for an op the device does not offer. */
	if (e == XBD_REQ_UNSUPPORTED)
		return BLKIF_RSP_EOPNOTSUPP;
	return BLKIF_RSP_ERROR;
}

/*
 * Wire sectors are 512 bytes whatever sector-size is; sector-size only
 * sets the alignment.  The daemon passes one of 512..4096; anything else
 * is treated as 512 rather than dividing by zero.
 */
static unsigned int sectors_per_block(const struct xbd_limits *lim)
{
	unsigned int ss = lim->sector_size;

	if (ss < 512 || ss > XBD_PAGE_SIZE || (ss & (ss - 1)) != 0)
		return 1;
	return ss >> XBD_SECTOR_SHIFT;
}

/* start + count <= size, written so that nothing can overflow. */
static bool range_fits(uint64_t start, uint64_t count, uint64_t size)
{
	return count <= size && start <= size - count;
}

enum xbd_req_error xbd_req_check_indirect(struct xbd_request *req,
					  const struct xbd_limits *lim)
{
	unsigned int max;

	if (!req->indirect)
		return XBD_REQ_OK;
	req->nr_indirect_pages = 0;
	if (lim->max_indirect_segs == 0)
		return XBD_REQ_UNSUPPORTED;
	if (req->operation != BLKIF_OP_READ && req->operation != BLKIF_OP_WRITE)
		return XBD_REQ_BAD_INDIRECT_OP;
	if (req->nr_segments == 0)
		return XBD_REQ_BAD_NR_SEGS;
	/* Never more than seg[] holds, whatever the daemon advertises. */
	max = lim->max_indirect_segs < XBD_MAX_INDIRECT_SEGS ? lim->max_indirect_segs
							      : XBD_MAX_INDIRECT_SEGS;
	if (req->nr_segments > max)
		return XBD_REQ_TOO_MANY_INDIRECT;
	/*
	 * The frontend does not say how many indirect pages it filled; the
	 * count follows from the segments (blkif.h), and grefs past it are
	 * never looked at.
	 */
	req->nr_indirect_pages = XBD_INDIRECT_PAGES(req->nr_segments);
	return XBD_REQ_OK;
}

void xbd_req_load_indirect(struct xbd_request *req, const void *const *pages)
{
	unsigned int n = req->nr_segments;
	unsigned int i;

	if (!req->indirect)
		return;
	/* Only what xbd_req_check_indirect() accepted: pages[] is that long. */
	if (n > XBD_MAX_SEGS)
		n = XBD_MAX_SEGS;
	if (n > (unsigned int)req->nr_indirect_pages * XBD_SEGS_PER_INDIRECT_PAGE)
		n = (unsigned int)req->nr_indirect_pages * XBD_SEGS_PER_INDIRECT_PAGE;
	for (i = 0; i < n; i++) {
		const void *page = pages[i / XBD_SEGS_PER_INDIRECT_PAGE];
		size_t off = (i % XBD_SEGS_PER_INDIRECT_PAGE) * XBD_SEG_SIZE;

		req->seg[i].gref = xbd_ld32(page, off + XBD_SEG_OFF_GREF);
		req->seg[i].first_sect = xbd_ld8(page, off + XBD_SEG_OFF_FIRST);
		req->seg[i].last_sect = xbd_ld8(page, off + XBD_SEG_OFF_LAST);
	}
}

/*
 * The data-carrying part of read, write and barrier: every segment, the
 * alignment to sector-size, and the range against the disk.  Sets
 * nr_sectors as soon as it is known, so a caller logging a BEYOND_END
 * refusal can print the range.
 */
static enum xbd_req_error check_data(struct xbd_request *req, const struct xbd_limits *lim)
{
	unsigned int k = sectors_per_block(lim);
	uint64_t total = 0;
	unsigned int i;

	for (i = 0; i < req->nr_segments; i++) {
		unsigned int first = req->seg[i].first_sect;
		unsigned int last = req->seg[i].last_sect;

		if (first > last || last >= SECTORS_PER_PAGE)
			return XBD_REQ_BAD_SECTORS;
		if (first % k != 0 || (last + 1) % k != 0)
			return XBD_REQ_MISALIGNED;
		total += last - first + 1;
	}
	req->nr_sectors = total;
	if (req->sector_number % k != 0)
		return XBD_REQ_MISALIGNED;
	if (!range_fits(req->sector_number, total, lim->nr_sectors))
		return XBD_REQ_BEYOND_END;
	return XBD_REQ_OK;
}

static enum xbd_req_error check_discard(struct xbd_request *req, const struct xbd_limits *lim)
{
	unsigned int k = sectors_per_block(lim);

	if (!lim->discard)
		return XBD_REQ_UNSUPPORTED;
	if (lim->readonly)
		return XBD_REQ_READONLY;
	if ((req->discard_flags & ~BLKIF_DISCARD_SECURE) != 0 || req->nr_sectors == 0)
		return XBD_REQ_BAD_DISCARD;
	/* blkif.h: the secure flag is "ignored if discard-secure=0". */
	if (!lim->discard_secure)
		req->discard_flags &= (uint8_t)~BLKIF_DISCARD_SECURE;
	if (req->sector_number % k != 0 || req->nr_sectors % k != 0)
		return XBD_REQ_MISALIGNED;
	if (!range_fits(req->sector_number, req->nr_sectors, lim->nr_sectors))
		return XBD_REQ_BEYOND_END;
	return XBD_REQ_OK;
}

enum xbd_req_error xbd_req_validate(struct xbd_request *req, const struct xbd_limits *lim)
{
	enum xbd_req_error e;

	if (req->indirect) {
		e = xbd_req_check_indirect(req, lim);
		if (e != XBD_REQ_OK)
			return e;
		if (req->operation == BLKIF_OP_WRITE && lim->readonly)
			return XBD_REQ_READONLY;
		return check_data(req, lim);
	}
	req->nr_indirect_pages = 0;

	switch (req->operation) {
	case BLKIF_OP_READ:
	case BLKIF_OP_WRITE:
		if (req->operation == BLKIF_OP_WRITE && lim->readonly)
			return XBD_REQ_READONLY;
		if (req->nr_segments == 0 || req->nr_segments > BLKIF_MAX_SEGMENTS_PER_REQUEST)
			return XBD_REQ_BAD_NR_SEGS;
		return check_data(req, lim);
	case BLKIF_OP_WRITE_BARRIER:
		if (!lim->barrier)
			return XBD_REQ_UNSUPPORTED;
		if (lim->readonly)
			return XBD_REQ_READONLY;
		/* A barrier may carry data (a FUA write) or none (a flush). */
		if (req->nr_segments > BLKIF_MAX_SEGMENTS_PER_REQUEST)
			return XBD_REQ_BAD_NR_SEGS;
		req->nr_sectors = 0;
		if (req->nr_segments == 0)
			return XBD_REQ_OK;
		return check_data(req, lim);
	case BLKIF_OP_FLUSH_DISKCACHE:
		if (!lim->flush)
			return XBD_REQ_UNSUPPORTED;
		if (req->nr_segments != 0)
			return XBD_REQ_BAD_NR_SEGS;
		req->nr_sectors = 0;
		return XBD_REQ_OK;
	case BLKIF_OP_DISCARD:
		return check_discard(req, lim);
	default:
		/* BLKIF_OP_RESERVED_1 included: no backend implements it. */
		return XBD_REQ_BAD_OP;
	}
}
