/*
 * test-ring-abi: the byte layout of requests and responses in each ABI
 * (native, x86_32, x86_64), the protocol key, and the ring geometry.
 *
 * Expected offsets are written out by hand here (from blkif.h and the
 * x86_32/x86_64 layouts Linux blkback uses), and the native ABI is also
 * cross-checked against xen/io/ring.h's own macros, so a wrong table in
 * ring/abi.c cannot agree with itself.
 */
#include <errno.h>

/* xen/io/ring.h's macros call mb(), rmb() and wmb() of the includer. */
#define mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define wmb() __atomic_thread_fence(__ATOMIC_RELEASE)

#include <xen/io/protocols.h>
#include <xen/io/ring.h>

#include "tests/ring/ring-test.h"

struct abi_offsets {
	size_t ent; /* entry stride */
	size_t rw_id, rw_sector, rw_seg;
	size_t dis_id, dis_sector, dis_nr;
	size_t ind_id, ind_sector, ind_handle, ind_grefs;
};

static const struct abi_offsets off_x86_32 = {
	.ent = 108,
	.rw_id = 4, .rw_sector = 12, .rw_seg = 20,
	.dis_id = 4, .dis_sector = 12, .dis_nr = 20,
	.ind_id = 4, .ind_sector = 12, .ind_handle = 20, .ind_grefs = 24,
};

static const struct abi_offsets off_x86_64 = {
	.ent = 112,
	.rw_id = 8, .rw_sector = 16, .rw_seg = 24,
	.dis_id = 8, .dis_sector = 16, .dis_nr = 24,
	.ind_id = 8, .ind_sector = 16, .ind_handle = 24, .ind_grefs = 28,
};

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

static void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof(v));
}

static void test_protocol(void)
{
	enum xbd_abi abi = XBD_ABI_X86_32;

	CHECK_EQ(xbd_abi_from_protocol(NULL, &abi), 0);
	CHECK_EQ(abi, XBD_ABI_NATIVE);
	abi = XBD_ABI_X86_32;
	CHECK_EQ(xbd_abi_from_protocol("", &abi), 0);
	CHECK_EQ(abi, XBD_ABI_NATIVE);
	CHECK_EQ(xbd_abi_from_protocol("x86_32-abi", &abi), 0);
	CHECK_EQ(abi, XBD_ABI_X86_32);
	CHECK_EQ(xbd_abi_from_protocol("x86_64-abi", &abi), 0);
	CHECK_EQ(abi, XBD_ABI_X86_64);
	CHECK_EQ(xbd_abi_from_protocol("x86_16-abi", &abi), -EINVAL);
	CHECK_EQ(xbd_abi_from_protocol("x86_32-abi ", &abi), -EINVAL);
	CHECK(strcmp(xbd_abi_protocol(XBD_ABI_X86_32), "x86_32-abi") == 0);
	CHECK(strcmp(xbd_abi_protocol(XBD_ABI_X86_64), "x86_64-abi") == 0);
	CHECK(strcmp(xbd_abi_protocol(XBD_ABI_NATIVE), XEN_IO_PROTO_ABI_NATIVE) == 0);
	/* Linux writes "arm-abi" on Arm: native there, unknown on x86 (as in Linux blkback). */
#if defined(__aarch64__) || defined(__arm__)
	CHECK_EQ(xbd_abi_from_protocol("arm-abi", &abi), 0);
	CHECK_EQ(abi, XBD_ABI_NATIVE);
	CHECK(strcmp(xbd_abi_protocol(XBD_ABI_NATIVE), "arm-abi") == 0);
#else
	CHECK_EQ(xbd_abi_from_protocol("arm-abi", &abi), -EINVAL);
#endif
}

static void test_geometry(void)
{
	unsigned int order;
	struct xring r;
	void *pages = test_pages(XBD_RING_MAX_PAGES);

	for (order = 0; order <= XBD_RING_MAX_ORDER; order++) {
		unsigned int n = 1u << order;
		/* 32 entries of 108 or 112 bytes fit in one page after the header. */
		unsigned int expect = 32u << order;

		CHECK_EQ(xring_size(XBD_ABI_X86_32, n), expect);
		CHECK_EQ(xring_size(XBD_ABI_X86_64, n), expect);
		CHECK_EQ(xring_size(XBD_ABI_NATIVE, n),
			 __CONST_RING_SIZE(blkif, (size_t)n * XBD_PAGE_SIZE));
		CHECK_EQ(xring_attach(&r, pages, n, XBD_ABI_X86_32, XRING_BACK), 0);
		CHECK_EQ(r.nr_ents, expect);
		CHECK_EQ(r.ent_size, 108);
		CHECK_EQ(xring_attach(&r, pages, n, XBD_ABI_X86_64, XRING_FRONT), 0);
		CHECK_EQ(r.ent_size, 112);
		/* The last entry must end inside the pages. */
		CHECK(64 + (size_t)r.nr_ents * r.ent_size <= (size_t)n * XBD_PAGE_SIZE);
	}
	CHECK_EQ(xring_attach(&r, pages, 0, XBD_ABI_NATIVE, XRING_BACK), -EINVAL);
	CHECK_EQ(xring_attach(&r, pages, 3, XBD_ABI_NATIVE, XRING_BACK), -EINVAL);
	CHECK_EQ(xring_attach(&r, pages, 32, XBD_ABI_NATIVE, XRING_BACK), -EINVAL);
	CHECK_EQ(xring_attach(&r, NULL, 1, XBD_ABI_NATIVE, XRING_BACK), -EINVAL);
	free(pages);
}

/* A frontend's requests land at the documented offsets of its ABI. */
static void test_front_layout(enum xbd_abi abi, const struct abi_offsets *o)
{
	uint8_t *sring = test_pages(1);
	struct xring r;
	struct xbd_request q;
	const uint8_t *e;
	unsigned int i;

	xring_init_shared(sring, 1);
	CHECK_EQ(shared_idx(sring)[IDX_REQ_EVENT], 1);
	CHECK_EQ(shared_idx(sring)[IDX_RSP_EVENT], 1);
	CHECK_EQ(xring_attach(&r, sring, 1, abi, XRING_FRONT), 0);

	/* slot 0: a write with two segments */
	memset(&q, 0, sizeof(q));
	q.operation = BLKIF_OP_WRITE;
	q.id = 0x1122334455667788ull;
	q.sector_number = 0x0102030405060708ull;
	q.handle = 0xbeef;
	q.nr_segments = 2;
	q.seg[0] = (struct xbd_seg){ .gref = 0xa0a1a2a3, .first_sect = 1, .last_sect = 6 };
	q.seg[1] = (struct xbd_seg){ .gref = 0xb0b1b2b3, .first_sect = 0, .last_sect = 7 };
	CHECK_EQ(xring_front_put_request(&r, &q), 0);

	/* slot 1: a secure discard */
	memset(&q, 0, sizeof(q));
	q.operation = BLKIF_OP_DISCARD;
	q.discard_flags = BLKIF_DISCARD_SECURE;
	q.id = 0xdeadbeefcafef00dull;
	q.sector_number = 4096;
	q.nr_sectors = 0x10000000fffull;
	q.handle = 0x1234;
	CHECK_EQ(xring_front_put_request(&r, &q), 0);

	/* slot 2: an indirect read of 300 segments over one page */
	memset(&q, 0, sizeof(q));
	q.operation = BLKIF_OP_READ;
	q.indirect = true;
	q.id = 77;
	q.sector_number = 0xfedcba9876543210ull;
	q.handle = 0x5151;
	q.nr_segments = 300;
	for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
		q.indirect_grefs[i] = 0x1000 + i;
	CHECK_EQ(xring_front_put_request(&r, &q), 0);

	/* Nothing is visible to the backend before the push. */
	CHECK_EQ(shared_idx(sring)[IDX_REQ_PROD], 0);
	CHECK(xring_front_push(&r));
	CHECK_EQ(shared_idx(sring)[IDX_REQ_PROD], 3);

	e = sring + 64;
	CHECK_EQ(e[0], BLKIF_OP_WRITE);
	CHECK_EQ(e[1], 2);
	CHECK_EQ(get16(e + 2), 0xbeef);
	CHECK_EQ(get64(e + o->rw_id), 0x1122334455667788ull);
	CHECK_EQ(get64(e + o->rw_sector), 0x0102030405060708ull);
	CHECK_EQ(get32(e + o->rw_seg), 0xa0a1a2a3);
	CHECK_EQ(e[o->rw_seg + 4], 1);
	CHECK_EQ(e[o->rw_seg + 5], 6);
	CHECK_EQ(get32(e + o->rw_seg + 8), 0xb0b1b2b3);
	CHECK_EQ(e[o->rw_seg + 12], 0);
	CHECK_EQ(e[o->rw_seg + 13], 7);

	e = sring + 64 + o->ent;
	CHECK_EQ(e[0], BLKIF_OP_DISCARD);
	CHECK_EQ(e[1], BLKIF_DISCARD_SECURE);
	CHECK_EQ(get64(e + o->dis_id), 0xdeadbeefcafef00dull);
	CHECK_EQ(get64(e + o->dis_sector), 4096);
	CHECK_EQ(get64(e + o->dis_nr), 0x10000000fffull);

	e = sring + 64 + 2 * o->ent;
	CHECK_EQ(e[0], BLKIF_OP_INDIRECT);
	CHECK_EQ(e[1], BLKIF_OP_READ);
	CHECK_EQ(get16(e + 2), 300);
	CHECK_EQ(get64(e + o->ind_id), 77);
	CHECK_EQ(get64(e + o->ind_sector), 0xfedcba9876543210ull);
	CHECK_EQ(get16(e + o->ind_handle), 0x5151);
	for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
		CHECK_EQ(get32(e + o->ind_grefs + 4 * i), 0x1000 + i);
	/* The indirect request ends 64 bytes in; nothing of it spills past. */
	CHECK_EQ(e[o->ind_grefs + 32], 0);

	/* Too many segments cannot be written. */
	memset(&q, 0, sizeof(q));
	q.operation = BLKIF_OP_READ;
	q.nr_segments = 12;
	CHECK_EQ(xring_front_put_request(&r, &q), -EINVAL);
	free(sring);
}

/* Hand-written request bytes come out of the backend as the right fields. */
static void test_back_layout(enum xbd_abi abi, const struct abi_offsets *o)
{
	uint8_t *sring = test_pages(1);
	struct xring r;
	struct xbd_request q[5];
	uint8_t *e;
	unsigned int i;

	xring_init_shared(sring, 1);
	e = sring + 64;
	e[0] = BLKIF_OP_READ;
	e[1] = 3;
	put16(e + 2, 0x0202);
	put64(e + o->rw_id, 0xa1a2a3a4a5a6a7a8ull);
	put64(e + o->rw_sector, 1234);
	for (i = 0; i < 3; i++) {
		put32(e + o->rw_seg + 8 * i, 100 + i);
		e[o->rw_seg + 8 * i + 4] = (uint8_t)i;
		e[o->rw_seg + 8 * i + 5] = 7;
	}

	e = sring + 64 + o->ent;
	e[0] = BLKIF_OP_DISCARD;
	e[1] = 1;
	put64(e + o->dis_id, 42);
	put64(e + o->dis_sector, 8);
	put64(e + o->dis_nr, 16);

	e = sring + 64 + 2 * o->ent;
	e[0] = BLKIF_OP_INDIRECT;
	e[1] = BLKIF_OP_WRITE;
	put16(e + 2, 0x0123);
	put64(e + o->ind_id, 0x0807060504030201ull);
	put64(e + o->ind_sector, 99);
	put16(e + o->ind_handle, 0x3333);
	for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
		put32(e + o->ind_grefs + 4 * i, 0x2000 + i);

	e = sring + 64 + 3 * o->ent;
	e[0] = BLKIF_OP_FLUSH_DISKCACHE;
	e[1] = 0;
	put64(e + o->rw_id, 5);

	e = sring + 64 + 4 * o->ent;
	e[0] = BLKIF_OP_RESERVED_1;
	put64(e + o->rw_id, 6);

	shared_idx(sring)[IDX_REQ_PROD] = 5;
	CHECK_EQ(xring_attach(&r, sring, 1, abi, XRING_BACK), 0);
	CHECK_EQ(xring_back_pending(&r), 5);
	CHECK_EQ(xring_back_consume(&r, q, 5), 5);
	CHECK_EQ(r.req_cons, 5);

	CHECK_EQ(q[0].operation, BLKIF_OP_READ);
	CHECK_EQ(q[0].raw_operation, BLKIF_OP_READ);
	CHECK(!q[0].indirect);
	CHECK_EQ(q[0].nr_segments, 3);
	CHECK_EQ(q[0].handle, 0x0202);
	CHECK_EQ(q[0].id, 0xa1a2a3a4a5a6a7a8ull);
	CHECK_EQ(q[0].sector_number, 1234);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(q[0].seg[i].gref, 100 + i);
		CHECK_EQ(q[0].seg[i].first_sect, i);
		CHECK_EQ(q[0].seg[i].last_sect, 7);
	}

	CHECK_EQ(q[1].operation, BLKIF_OP_DISCARD);
	CHECK_EQ(q[1].discard_flags, BLKIF_DISCARD_SECURE);
	CHECK_EQ(q[1].id, 42);
	CHECK_EQ(q[1].sector_number, 8);
	CHECK_EQ(q[1].nr_sectors, 16);

	CHECK(q[2].indirect);
	CHECK_EQ(q[2].raw_operation, BLKIF_OP_INDIRECT);
	CHECK_EQ(q[2].operation, BLKIF_OP_WRITE);
	CHECK_EQ(q[2].nr_segments, 0x0123);
	CHECK_EQ(q[2].id, 0x0807060504030201ull);
	CHECK_EQ(q[2].sector_number, 99);
	CHECK_EQ(q[2].handle, 0x3333);
	for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
		CHECK_EQ(q[2].indirect_grefs[i], 0x2000 + i);

	CHECK_EQ(q[3].operation, BLKIF_OP_FLUSH_DISKCACHE);
	CHECK_EQ(q[3].nr_segments, 0);
	CHECK_EQ(q[3].id, 5);

	CHECK_EQ(q[4].operation, BLKIF_OP_RESERVED_1);
	CHECK_EQ(q[4].id, 6);
	free(sring);
}

/*
 * Responses: id at 0, operation at 8, status at 10, in entries of the
 * ABI's stride, written field by field: no other byte of the entry moves.
 */
static void test_response_layout(enum xbd_abi abi, const struct abi_offsets *o)
{
	uint8_t *sring = test_pages(1);
	uint8_t before[112];
	struct xring r;
	struct xbd_response rsp[2];
	const uint8_t *e;
	size_t i;

	xring_init_shared(sring, 1);
	memset(sring + 64, 0x5a, 4096 - 64);
	shared_idx(sring)[IDX_REQ_PROD] = 2; /* the responses answer two requests */
	CHECK_EQ(xring_attach(&r, sring, 1, abi, XRING_BACK), 0);
	memcpy(before, sring + 64, o->ent);
	xring_back_put_response(&r, 0x0102030405060708ull, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	xring_back_put_response(&r, 0xffffffffffffffffull, BLKIF_OP_INDIRECT, BLKIF_RSP_EOPNOTSUPP);
	CHECK_EQ(shared_idx(sring)[IDX_RSP_PROD], 0);
	CHECK(xring_back_push(&r)); /* rsp_event = 1 from init */
	CHECK_EQ(shared_idx(sring)[IDX_RSP_PROD], 2);

	e = sring + 64;
	CHECK_EQ(get64(e), 0x0102030405060708ull);
	CHECK_EQ(e[8], BLKIF_OP_WRITE);
	CHECK_EQ((int16_t)get16(e + 10), BLKIF_RSP_OKAY);
	for (i = 0; i < o->ent; i++) {
		if (i < 9 || i == 10 || i == 11)
			continue;
		CHECK_EQ(e[i], before[i]);
	}
	e = sring + 64 + o->ent;
	CHECK_EQ(get64(e), 0xffffffffffffffffull);
	CHECK_EQ(e[8], BLKIF_OP_INDIRECT);
	CHECK_EQ((int16_t)get16(e + 10), BLKIF_RSP_EOPNOTSUPP);

	/* And a frontend of the same ABI reads them back. */
	{
		struct xring f;

		CHECK_EQ(xring_attach(&f, sring, 1, abi, XRING_FRONT), 0);
		/* The frontend resumes at rsp_prod; rewind to read both. */
		f.rsp_cons = 0;
		CHECK_EQ(xring_front_consume(&f, rsp, 2), 2);
		CHECK_EQ(rsp[0].id, 0x0102030405060708ull);
		CHECK_EQ(rsp[0].operation, BLKIF_OP_WRITE);
		CHECK_EQ(rsp[0].status, BLKIF_RSP_OKAY);
		CHECK_EQ(rsp[1].id, 0xffffffffffffffffull);
		CHECK_EQ(rsp[1].status, BLKIF_RSP_EOPNOTSUPP);
	}
	free(sring);
}

/*
 * A claimed segment count above 11 copies only the 11 segments an entry
 * holds: nothing is read from the next entry or past the ring's end
 * (the last slot is used; ASan builds would see an overrun).
 */
static void test_oversized_nr_segments(enum xbd_abi abi, const struct abi_offsets *o)
{
	uint8_t *sring = test_pages(1);
	struct xbd_limits lim = test_limits();
	struct xring r;
	struct xbd_request q;
	uint8_t *e;

	xring_init_shared(sring, 1);
	e = sring + 64 + 31 * o->ent;
	memset(e, 0, o->ent);
	e[0] = BLKIF_OP_WRITE;
	e[1] = 255;
	put64(e + o->rw_id, 0x31);
	shared_idx(sring)[IDX_REQ_PROD] = 32;
	shared_idx(sring)[IDX_RSP_PROD] = 31;
	CHECK_EQ(xring_attach(&r, sring, 1, abi, XRING_BACK), 0);
	memset(&q, 0, sizeof(q));
	q.seg[11].gref = 0xdeadbeef;
	CHECK_EQ(xring_back_consume(&r, &q, 1), 1);
	CHECK_EQ(q.id, 0x31);
	CHECK_EQ(q.nr_segments, 255);
	CHECK_EQ(q.seg[11].gref, 0xdeadbeef);
	CHECK_EQ(xbd_req_validate(&q, &lim), XBD_REQ_BAD_NR_SEGS);
	free(sring);
}

/* Indirect pages hold struct blkif_request_segment arrays, the rest zeroed. */
static void test_indirect_page(void)
{
	uint8_t *page = test_pages(1);
	void *pages[1] = { page };
	static struct xbd_request q;
	unsigned int i;

	memset(&q, 0, sizeof(q));
	q.indirect = true;
	q.operation = BLKIF_OP_WRITE;
	q.nr_segments = 200;
	for (i = 0; i < 200; i++)
		q.seg[i] = (struct xbd_seg){ .gref = 0x10000 + i, .first_sect = 1, .last_sect = 6 };
	CHECK_EQ(XBD_INDIRECT_PAGES(200), 1);
	CHECK_EQ(XBD_INDIRECT_PAGES(512), 1);
	CHECK_EQ(XBD_INDIRECT_PAGES(513), 2);
	CHECK_EQ(xring_front_fill_indirect(&q, pages), 0);
	CHECK_EQ(get32(page), 0x10000);
	CHECK_EQ(page[4], 1);
	CHECK_EQ(page[5], 6);
	CHECK_EQ(page[6], 0);
	CHECK_EQ(get32(page + 8 * 199), 0x10000 + 199);
	CHECK_EQ(page[8 * 199 + 5], 6);
	for (i = 8 * 200; i < XBD_PAGE_SIZE; i++)
		CHECK_EQ(page[i], 0);
	q.nr_segments = XBD_MAX_SEGS + 1;
	CHECK_EQ(xring_front_fill_indirect(&q, pages), -EINVAL);
	free(page);
}

/* The native ABI against xen/io/ring.h's own macros, in both directions. */
static void test_native_vs_xen_macros(void)
{
	blkif_sring_t *sring = test_pages(1);
	blkif_front_ring_t xf;
	blkif_back_ring_t xb;
	struct xring r;
	struct xbd_request q[2];
	blkif_request_t *req;
	blkif_request_discard_t *dis;
	blkif_response_t *rsp;
	int notify;

	SHARED_RING_INIT(sring);
	FRONT_RING_INIT(&xf, sring, XBD_PAGE_SIZE);
	req = RING_GET_REQUEST(&xf, xf.req_prod_pvt++);
	req->operation = BLKIF_OP_READ;
	req->nr_segments = 1;
	req->handle = 51712;
	req->id = 0x55aa55aa55aa55aaull;
	req->sector_number = 2048;
	req->seg[0].gref = 77;
	req->seg[0].first_sect = 0;
	req->seg[0].last_sect = 7;
	dis = (blkif_request_discard_t *)RING_GET_REQUEST(&xf, xf.req_prod_pvt++);
	dis->operation = BLKIF_OP_DISCARD;
	dis->flag = 0;
	dis->id = 3;
	dis->sector_number = 16;
	dis->nr_sectors = 64;
	RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&xf, notify);
	CHECK(notify);

	CHECK_EQ(xring_attach(&r, sring, 1, XBD_ABI_NATIVE, XRING_BACK), 0);
	CHECK_EQ(r.nr_ents, RING_SIZE(&xf));
	CHECK_EQ(xring_back_consume(&r, q, 2), 2);
	CHECK_EQ(q[0].id, 0x55aa55aa55aa55aaull);
	CHECK_EQ(q[0].handle, 51712);
	CHECK_EQ(q[0].sector_number, 2048);
	CHECK_EQ(q[0].seg[0].gref, 77);
	CHECK_EQ(q[0].seg[0].last_sect, 7);
	CHECK_EQ(q[1].operation, BLKIF_OP_DISCARD);
	CHECK_EQ(q[1].nr_sectors, 64);
	CHECK_EQ(q[1].sector_number, 16);

	xring_back_put_response(&r, q[0].id, q[0].raw_operation, BLKIF_RSP_OKAY);
	xring_back_put_response(&r, q[1].id, q[1].raw_operation, BLKIF_RSP_ERROR);
	CHECK(xring_back_push(&r));
	rsp = RING_GET_RESPONSE(&xf, xf.rsp_cons);
	CHECK_EQ(rsp->id, 0x55aa55aa55aa55aaull);
	CHECK_EQ(rsp->operation, BLKIF_OP_READ);
	CHECK_EQ(rsp->status, BLKIF_RSP_OKAY);
	rsp = RING_GET_RESPONSE(&xf, xf.rsp_cons + 1);
	CHECK_EQ(rsp->id, 3);
	CHECK_EQ(rsp->status, BLKIF_RSP_ERROR);
	CHECK_EQ(sring->rsp_prod, 2);

	/* And our frontend's request read by Xen's back ring. */
	SHARED_RING_INIT(sring);
	BACK_RING_INIT(&xb, sring, XBD_PAGE_SIZE);
	CHECK_EQ(xring_attach(&r, sring, 1, XBD_ABI_NATIVE, XRING_FRONT), 0);
	memset(&q[0], 0, sizeof(q[0]));
	q[0].operation = BLKIF_OP_WRITE;
	q[0].id = 9;
	q[0].sector_number = 10;
	q[0].nr_segments = 1;
	q[0].seg[0] = (struct xbd_seg){ .gref = 11, .first_sect = 2, .last_sect = 3 };
	CHECK_EQ(xring_front_put_request(&r, &q[0]), 0);
	CHECK(xring_front_push(&r));
	CHECK(RING_HAS_UNCONSUMED_REQUESTS(&xb));
	req = RING_GET_REQUEST(&xb, xb.req_cons);
	CHECK_EQ(req->operation, BLKIF_OP_WRITE);
	CHECK_EQ(req->id, 9);
	CHECK_EQ(req->sector_number, 10);
	CHECK_EQ(req->seg[0].gref, 11);
	CHECK_EQ(req->seg[0].first_sect, 2);
	CHECK_EQ(req->seg[0].last_sect, 3);
	free(sring);
}

int main(void)
{
	test_protocol();
	test_geometry();
	test_front_layout(XBD_ABI_X86_32, &off_x86_32);
	test_front_layout(XBD_ABI_X86_64, &off_x86_64);
	test_back_layout(XBD_ABI_X86_32, &off_x86_32);
	test_back_layout(XBD_ABI_X86_64, &off_x86_64);
	test_response_layout(XBD_ABI_X86_32, &off_x86_32);
	test_response_layout(XBD_ABI_X86_64, &off_x86_64);
	test_oversized_nr_segments(XBD_ABI_X86_32, &off_x86_32);
	test_oversized_nr_segments(XBD_ABI_X86_64, &off_x86_64);
#if defined(__x86_64__) || defined(__aarch64__) || defined(__arm__)
	/* arm-abi's bytes are x86_64's (uint64_t 8-aligned): native is checked against them */
	test_front_layout(XBD_ABI_NATIVE, &off_x86_64);
	test_back_layout(XBD_ABI_NATIVE, &off_x86_64);
	test_response_layout(XBD_ABI_NATIVE, &off_x86_64);
#endif
	test_indirect_page();
	test_native_vs_xen_macros();
	return test_result("test-ring-abi");
}
