/*
 * fuzz-ring: libFuzzer target for the blkif ring library.
 *
 * The input is what a hostile frontend controls (the whole shared ring:
 * indexes and entries, and an indirect page) plus the device limits and
 * ABI the backend chose:
 *
 *   byte 0      ABI (mod 3)            byte 1   ring order (mod 5)
 *   byte 2      limit flags            byte 3   sector-size = 512 << (b & 3)
 *   bytes 4-11  disk size in sectors   bytes 12-13 max indirect segments
 *   byte 14     consume batch size     byte 15  indirect page source
 *   then: the shared ring pages (missing bytes read as zero)
 *
 * The indirect page is the same input seen from offset 16 * byte 15, so
 * short inputs exercise both the ring and indirect segments.
 *
 * The backend consumes, checks, loads indirect segments and validates
 * everything, answers each request, and the frontend side consumes the
 * responses of a ring whose indexes the input also chose.  Anything the
 * validator accepts is re-checked here independently; a violation aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ring/ring.h"

#define HDR 16u

static uint8_t ring_mem[XBD_RING_MAX_PAGES * XBD_PAGE_SIZE] __attribute__((aligned(4096)));
static uint8_t ind_page[XBD_PAGE_SIZE] __attribute__((aligned(4096)));
static struct xbd_request reqs[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond)
{
	if (!cond)
		abort();
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Independent re-check of a request the validator accepted. */
static void check_accepted(const struct xbd_request *q, const struct xbd_limits *lim)
{
	unsigned int k = lim->sector_size / 512;
	uint64_t end, total = 0;
	unsigned int i;

	switch (q->operation) {
	case BLKIF_OP_READ:
	case BLKIF_OP_WRITE:
	case BLKIF_OP_WRITE_BARRIER:
		require(q->operation == BLKIF_OP_READ || !lim->readonly);
		require(q->operation != BLKIF_OP_WRITE_BARRIER || lim->barrier);
		if (q->indirect) {
			require(q->operation != BLKIF_OP_WRITE_BARRIER);
			require(lim->max_indirect_segs > 0);
			require(q->nr_segments >= 1 && q->nr_segments <= XBD_MAX_INDIRECT_SEGS);
			require(q->nr_segments <= lim->max_indirect_segs);
			require(q->nr_indirect_pages >= 1 &&
				q->nr_indirect_pages <= BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST);
		} else {
			require(q->nr_segments <= BLKIF_MAX_SEGMENTS_PER_REQUEST);
			require(q->nr_segments >= 1 || q->operation == BLKIF_OP_WRITE_BARRIER);
		}
		for (i = 0; i < q->nr_segments; i++) {
			require(q->seg[i].first_sect <= q->seg[i].last_sect);
			require(q->seg[i].last_sect <= 7);
			require(q->seg[i].first_sect % k == 0);
			require((q->seg[i].last_sect + 1u) % k == 0);
			total += q->seg[i].last_sect - q->seg[i].first_sect + 1u;
		}
		require(total == q->nr_sectors);
		if (q->nr_segments > 0) {
			require(q->sector_number % k == 0);
			require(!__builtin_add_overflow(q->sector_number, total, &end));
			require(end <= lim->nr_sectors);
		}
		break;
	case BLKIF_OP_FLUSH_DISKCACHE:
		require(lim->flush && !q->indirect && q->nr_segments == 0);
		break;
	case BLKIF_OP_DISCARD:
		require(lim->discard && !lim->readonly && !q->indirect);
		require(q->nr_sectors > 0);
		require((q->discard_flags & ~BLKIF_DISCARD_SECURE) == 0);
		require(lim->discard_secure || q->discard_flags == 0);
		require(q->sector_number % k == 0 && q->nr_sectors % k == 0);
		require(!__builtin_add_overflow(q->sector_number, q->nr_sectors, &end));
		require(end <= lim->nr_sectors);
		break;
	default:
		abort();
	}
}

static void run_backend(struct xbd_limits *lim, enum xbd_abi abi, unsigned int nr_pages,
			unsigned int batch)
{
	const void *pages[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
	struct xring b;
	unsigned int round, i;
	int n;

	for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
		pages[i] = ind_page;
	require(xring_attach(&b, ring_mem, nr_pages, abi, XRING_BACK) == 0);
	for (round = 0; round < 4; round++) {
		n = xring_back_consume(&b, reqs, batch);
		if (n < 0) {
			require(n == -EPROTO);
			require(xring_back_final_check(&b));
			return;
		}
		require((unsigned int)n <= batch && (unsigned int)n <= b.nr_ents);
		for (i = 0; i < (unsigned int)n; i++) {
			struct xbd_request *q = &reqs[i];
			enum xbd_req_error e = xbd_req_check_indirect(q, lim);

			if (e == XBD_REQ_OK && q->indirect) {
				require(q->nr_indirect_pages <= BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST);
				xbd_req_load_indirect(q, pages);
			}
			if (e == XBD_REQ_OK)
				e = xbd_req_validate(q, lim);
			require((unsigned int)e < XBD_REQ_NR_ERRORS);
			require(xbd_req_strerror(e) != NULL);
			if (e == XBD_REQ_OK)
				check_accepted(q, lim);
			xring_back_put_response(&b, q->id, q->raw_operation, xbd_req_error_status(e));
		}
		(void)xring_back_push(&b);
		if (!xring_back_final_check(&b))
			break;
	}
}

/* The frontend, facing a ring whose indexes the input chose. */
static void run_frontend(enum xbd_abi abi, unsigned int nr_pages)
{
	struct xbd_response rsp[32];
	struct xring f;
	int n;

	require(xring_attach(&f, ring_mem, nr_pages, abi, XRING_FRONT) == 0);
	/* Pretend some requests were pushed, then let rsp_prod say anything. */
	f.rsp_cons -= ring_mem[16] % 40;
	n = xring_front_consume(&f, rsp, 32);
	require(n == -EPROTO || (n >= 0 && n <= 32));
	(void)xring_front_final_check(&f);
	require(xring_front_free(&f) <= f.nr_ents);
}

/*
 * Round trip: any request the frontend agrees to write comes out of the
 * backend field for field (the input's first bytes seen as a request).
 */
static void run_roundtrip(const uint8_t *data, size_t size, enum xbd_abi abi)
{
	static uint8_t rt_ring[XBD_PAGE_SIZE] __attribute__((aligned(4096)));
	static struct xbd_request in, out;
	struct xring f, b;
	unsigned int i, nseg;

	if (size < 40)
		return;
	memset(&in, 0, sizeof(in));
	in.operation = data[0];
	in.indirect = data[1] & 1;
	in.discard_flags = data[2];
	in.nr_segments = (uint16_t)(data[3] | (data[1] & 0x1e) << 7);
	in.handle = (uint16_t)(data[4] | data[5] << 8);
	in.id = get64(data + 8);
	in.sector_number = get64(data + 16);
	in.nr_sectors = get64(data + 24);
	for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
		in.indirect_grefs[i] = (uint32_t)get64(data + 32) * (i + 1);
	for (i = 0; i < XBD_MAX_SEGS; i++) {
		in.seg[i].gref = (uint32_t)(data[32 + i % 8] * 0x01010101u + i);
		in.seg[i].first_sect = data[(i + 6) % 40];
		in.seg[i].last_sect = data[(i + 7) % 40];
	}

	xring_init_shared(rt_ring, 1);
	require(xring_attach(&f, rt_ring, 1, abi, XRING_FRONT) == 0);
	require(xring_attach(&b, rt_ring, 1, abi, XRING_BACK) == 0);
	if (xring_front_put_request(&f, &in) != 0)
		return;
	require(xring_front_push(&f));
	require(xring_back_consume(&b, &out, 1) == 1);
	require(out.id == in.id && out.indirect == in.indirect);
	if (in.indirect) {
		require(out.raw_operation == BLKIF_OP_INDIRECT);
		require(out.operation == in.operation);
	} else {
		require(out.raw_operation == in.operation && out.operation == in.operation);
	}
	if (in.indirect) {
		require(out.nr_segments == in.nr_segments);
		require(out.sector_number == in.sector_number && out.handle == in.handle);
		require(memcmp(out.indirect_grefs, in.indirect_grefs, sizeof(in.indirect_grefs)) == 0);
	} else if (in.operation == BLKIF_OP_DISCARD) {
		require(out.discard_flags == in.discard_flags);
		require(out.sector_number == in.sector_number && out.nr_sectors == in.nr_sectors);
		require(out.handle == in.handle);
	} else {
		require(out.nr_segments == in.nr_segments);
		require(out.sector_number == in.sector_number && out.handle == in.handle);
		nseg = in.nr_segments;
		for (i = 0; i < nseg; i++) {
			require(out.seg[i].gref == in.seg[i].gref);
			require(out.seg[i].first_sect == in.seg[i].first_sect);
			require(out.seg[i].last_sect == in.seg[i].last_sect);
		}
	}
	xring_back_put_response(&b, out.id, out.raw_operation, (int16_t)(data[6] | data[7] << 8));
	(void)xring_back_push(&b);
	{
		struct xbd_response rsp;

		require(xring_front_consume(&f, &rsp, 1) == 1);
		require(rsp.id == in.id && rsp.operation == out.raw_operation);
		require(rsp.status == (int16_t)(data[6] | data[7] << 8));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xbd_limits lim;
	enum xbd_abi abi;
	unsigned int order, nr_pages, batch;
	size_t ring_bytes, n, ind_off;

	if (size < HDR)
		return 0;
	abi = (enum xbd_abi)(data[0] % 3);
	order = data[1] % (XBD_RING_MAX_ORDER + 1);
	nr_pages = 1u << order;
	memset(&lim, 0, sizeof(lim));
	lim.readonly = data[2] & 1;
	lim.flush = data[2] & 2;
	lim.barrier = data[2] & 4;
	lim.discard = data[2] & 8;
	lim.discard_secure = data[2] & 16;
	lim.sector_size = 512u << (data[3] & 3);
	lim.nr_sectors = get64(data + 4);
	lim.max_indirect_segs = (unsigned int)(data[12] | data[13] << 8);
	batch = 1 + data[14] % 64;
	ind_off = (size_t)data[15] * 16;
	data += HDR;
	size -= HDR;

	ring_bytes = (size_t)nr_pages * XBD_PAGE_SIZE;
	memset(ring_mem, 0, ring_bytes);
	memset(ind_page, 0, sizeof(ind_page));
	n = size < ring_bytes ? size : ring_bytes;
	memcpy(ring_mem, data, n);
	if (size > ind_off) {
		size_t rest = size - ind_off;

		memcpy(ind_page, data + ind_off, rest < sizeof(ind_page) ? rest : sizeof(ind_page));
	}

	run_roundtrip(data, size, abi);
	run_backend(&lim, abi, nr_pages, batch);
	run_frontend(abi, nr_pages);
	return 0;
}
