/*
 * test-ring-validate: every validation rule, each op, in every ABI.
 *
 * Each case goes the whole way a guest request goes: a frontend writes it
 * into a shared ring, the backend copies it out (and loads the indirect
 * page), and xbd_req_validate() judges the copy.
 */
#include <errno.h>

#include "tests/ring/ring-test.h"

#define NO_OVERRIDE (-1)

static uint8_t indirect_page[XBD_PAGE_SIZE] __attribute__((aligned(4096)));

/*
 * Send in through a ring of the given ABI and validate what comes out.
 * nr_segs_byte, if not NO_OVERRIDE, is written over the nr_segments byte
 * after the frontend wrote the request (counts no frontend may send).
 */
static enum xbd_req_error run_abi(enum xbd_abi abi, const struct xbd_request *in,
				  const struct xbd_limits *lim, int nr_segs_byte,
				  struct xbd_request *out)
{
	void *sring = test_pages(1);
	struct xring f, b;
	enum xbd_req_error e;
	const void *pages[1] = { indirect_page };
	unsigned int i;

	xring_init_shared(sring, 1);
	CHECK_EQ(xring_attach(&f, sring, 1, abi, XRING_FRONT), 0);
	CHECK_EQ(xring_attach(&b, sring, 1, abi, XRING_BACK), 0);
	CHECK_EQ(xring_front_put_request(&f, in), 0);
	if (nr_segs_byte != NO_OVERRIDE)
		((uint8_t *)sring)[64 + 1] = (uint8_t)nr_segs_byte;
	xring_front_push(&f);
	CHECK_EQ(xring_back_consume(&b, out, 1), 1);

	e = xbd_req_check_indirect(out, lim);
	if (e == XBD_REQ_OK && out->indirect) {
		/* The frontend's indirect page: segments as struct blkif_request_segment. */
		memset(indirect_page, 0xee, sizeof(indirect_page));
		for (i = 0; i < in->nr_segments && i < XBD_SEGS_PER_INDIRECT_PAGE; i++) {
			struct blkif_request_segment s = {
				.gref = in->seg[i].gref,
				.first_sect = in->seg[i].first_sect,
				.last_sect = in->seg[i].last_sect,
			};
			memcpy(indirect_page + 8 * i, &s, sizeof(s));
		}
		CHECK_EQ(out->nr_indirect_pages, 1);
		xbd_req_load_indirect(out, pages);
	}
	if (e == XBD_REQ_OK)
		e = xbd_req_validate(out, lim);
	free(sring);
	return e;
}

static struct xbd_request last_out;

/* The verdict must be the same in every ABI; returns it. */
static enum xbd_req_error run_ovr(const struct xbd_request *in, const struct xbd_limits *lim,
				  int nr_segs_byte)
{
	static struct xbd_request out;
	enum xbd_req_error first = XBD_REQ_OK;
	size_t i;

	for (i = 0; i < 3; i++) {
		enum xbd_req_error e = run_abi(test_abis[i], in, lim, nr_segs_byte, &out);

		if (i == 0) {
			first = e;
			last_out = out;
		} else if (e != first) {
			fprintf(stderr, "ABI %s disagrees: %d vs %d\n", test_abi_names[i], e, first);
			test_failures++;
		}
		CHECK_EQ(out.id, in->id);
	}
	return first;
}

static enum xbd_req_error run(const struct xbd_request *in, const struct xbd_limits *lim)
{
	return run_ovr(in, lim, NO_OVERRIDE);
}

static struct xbd_request rw(uint8_t op, uint64_t sector, unsigned int nseg)
{
	struct xbd_request q;
	unsigned int i;

	memset(&q, 0, sizeof(q));
	q.operation = op;
	q.id = 0xabcdef0123456789ull;
	q.sector_number = sector;
	q.nr_segments = (uint16_t)nseg;
	for (i = 0; i < nseg; i++)
		q.seg[i] = (struct xbd_seg){ .gref = 1000 + i, .first_sect = 0, .last_sect = 7 };
	return q;
}

static struct xbd_request discard(uint64_t sector, uint64_t n, uint8_t flags)
{
	struct xbd_request q;

	memset(&q, 0, sizeof(q));
	q.operation = BLKIF_OP_DISCARD;
	q.id = 31337;
	q.sector_number = sector;
	q.nr_sectors = n;
	q.discard_flags = flags;
	return q;
}

static struct xbd_request indirect(uint8_t inner, uint64_t sector, unsigned int nseg)
{
	struct xbd_request q = rw(inner, sector, nseg);

	q.indirect = true;
	q.indirect_grefs[0] = 4242;
	return q;
}

static void test_ops(void)
{
	struct xbd_limits lim = test_limits();
	struct xbd_request q;

	q = rw(BLKIF_OP_READ, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 8);
	CHECK_EQ(last_out.raw_operation, BLKIF_OP_READ);

	q = rw(BLKIF_OP_WRITE, 16, 11);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 88);
	CHECK_EQ(last_out.seg[10].gref, 1010);

	q = rw(BLKIF_OP_WRITE_BARRIER, 0, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 0);
	q = rw(BLKIF_OP_WRITE_BARRIER, 8, 3);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 24);

	q = rw(BLKIF_OP_FLUSH_DISKCACHE, 0, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);

	q = discard(0, 2048, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 2048);

	q = indirect(BLKIF_OP_READ, 64, 256);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 2048);
	CHECK_EQ(last_out.raw_operation, BLKIF_OP_INDIRECT);
	CHECK_EQ(last_out.operation, BLKIF_OP_READ);
	CHECK_EQ(last_out.indirect_grefs[0], 4242);
	CHECK_EQ(last_out.seg[255].gref, 1255);
	q = indirect(BLKIF_OP_WRITE, 0, 3); /* indirect below 11 segments is legal */
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 24);
}

static void test_bad_op(void)
{
	struct xbd_limits lim = test_limits();
	struct xbd_request q;
	static const uint8_t bad[] = { BLKIF_OP_RESERVED_1, 7, 8, 0x80, 0xff };
	size_t i;

	for (i = 0; i < sizeof(bad); i++) {
		q = rw(bad[i], 0, 1);
		CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_OP);
		CHECK_EQ(last_out.raw_operation, bad[i]);
	}
	/*
	 * An internal form claiming op INDIRECT without the flag is nonsense:
	 * the frontend will not write it, the validator refuses it.
	 */
	q = rw(BLKIF_OP_INDIRECT, 0, 1);
	CHECK_EQ(xbd_req_validate(&q, &lim), XBD_REQ_BAD_OP);
	{
		void *sring = test_pages(1);
		struct xring f;

		xring_init_shared(sring, 1);
		CHECK_EQ(xring_attach(&f, sring, 1, XBD_ABI_NATIVE, XRING_FRONT), 0);
		CHECK_EQ(xring_front_put_request(&f, &q), -EINVAL);
		free(sring);
	}
}

static void test_unsupported(void)
{
	struct xbd_limits none = test_limits();
	struct xbd_request q;

	none.flush = none.barrier = none.discard = false;
	none.max_indirect_segs = 0;
	q = rw(BLKIF_OP_FLUSH_DISKCACHE, 0, 0);
	CHECK_EQ(run(&q, &none), XBD_REQ_UNSUPPORTED);
	q = rw(BLKIF_OP_WRITE_BARRIER, 0, 0);
	CHECK_EQ(run(&q, &none), XBD_REQ_UNSUPPORTED);
	q = discard(0, 8, 0);
	CHECK_EQ(run(&q, &none), XBD_REQ_UNSUPPORTED);
	q = indirect(BLKIF_OP_READ, 0, 16);
	CHECK_EQ(run(&q, &none), XBD_REQ_UNSUPPORTED);
	/* Plain reads and writes are always offered. */
	q = rw(BLKIF_OP_WRITE, 0, 2);
	CHECK_EQ(run(&q, &none), XBD_REQ_OK);
}

static void test_readonly(void)
{
	struct xbd_limits lim = test_limits();
	struct xbd_request q;

	lim.readonly = true;
	q = rw(BLKIF_OP_WRITE, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_READONLY);
	q = rw(BLKIF_OP_WRITE_BARRIER, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_READONLY);
	q = rw(BLKIF_OP_WRITE_BARRIER, 0, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_READONLY);
	q = discard(0, 8, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_READONLY);
	q = indirect(BLKIF_OP_WRITE, 0, 20);
	CHECK_EQ(run(&q, &lim), XBD_REQ_READONLY);
	q = rw(BLKIF_OP_READ, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	q = indirect(BLKIF_OP_READ, 0, 20);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	/* Flushing a read-only disk changes nothing and is harmless. */
	q = rw(BLKIF_OP_FLUSH_DISKCACHE, 0, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
}

static void test_nr_segs(void)
{
	struct xbd_limits lim = test_limits();
	struct xbd_request q;

	q = rw(BLKIF_OP_READ, 0, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_NR_SEGS);
	q = rw(BLKIF_OP_WRITE, 0, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_NR_SEGS);
	q = rw(BLKIF_OP_READ, 0, 11);
	CHECK_EQ(run_ovr(&q, &lim, 12), XBD_REQ_BAD_NR_SEGS);
	CHECK_EQ(run_ovr(&q, &lim, 255), XBD_REQ_BAD_NR_SEGS);
	q = rw(BLKIF_OP_WRITE_BARRIER, 0, 11);
	CHECK_EQ(run_ovr(&q, &lim, 12), XBD_REQ_BAD_NR_SEGS);
	q = rw(BLKIF_OP_FLUSH_DISKCACHE, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_NR_SEGS);
	q = indirect(BLKIF_OP_READ, 0, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_NR_SEGS);
	/* The frontend refuses to write what the entry cannot hold. */
	q = rw(BLKIF_OP_READ, 0, 11);
	q.nr_segments = 12;
	{
		void *sring = test_pages(1);
		struct xring f;

		xring_init_shared(sring, 1);
		CHECK_EQ(xring_attach(&f, sring, 1, XBD_ABI_X86_32, XRING_FRONT), 0);
		CHECK_EQ(xring_front_put_request(&f, &q), -EINVAL);
		free(sring);
	}
}

static void test_indirect(void)
{
	struct xbd_limits lim = test_limits();
	struct xbd_request q;

	q = indirect(BLKIF_OP_FLUSH_DISKCACHE, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_INDIRECT_OP);
	q = indirect(BLKIF_OP_DISCARD, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_INDIRECT_OP);
	q = indirect(BLKIF_OP_WRITE_BARRIER, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_INDIRECT_OP);
	q = indirect(BLKIF_OP_INDIRECT, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_INDIRECT_OP);

	lim.max_indirect_segs = 32;
	q = indirect(BLKIF_OP_READ, 0, 32);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	q = indirect(BLKIF_OP_READ, 0, 33);
	CHECK_EQ(run(&q, &lim), XBD_REQ_TOO_MANY_INDIRECT);
	/* Never more than the library can hold, whatever was advertised. */
	lim.max_indirect_segs = 4096;
	q = indirect(BLKIF_OP_READ, 0, 256);
	q.nr_segments = 257;
	CHECK_EQ(run(&q, &lim), XBD_REQ_TOO_MANY_INDIRECT);
	q.nr_segments = 4096;
	CHECK_EQ(run(&q, &lim), XBD_REQ_TOO_MANY_INDIRECT);
	CHECK_EQ(last_out.nr_indirect_pages, 0);

	/* Segment rules apply to segments from the indirect page too. */
	lim = test_limits();
	q = indirect(BLKIF_OP_WRITE, 0, 100);
	q.seg[99].first_sect = 5;
	q.seg[99].last_sect = 4;
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_SECTORS);
	q = indirect(BLKIF_OP_WRITE, lim.nr_sectors - 8 * 100, 100);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	q = indirect(BLKIF_OP_WRITE, lim.nr_sectors - 8 * 100 + 1, 100);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);

	/* Not indirect: nothing for check_indirect to do. */
	q = rw(BLKIF_OP_READ, 0, 1);
	CHECK_EQ(xbd_req_check_indirect(&q, &lim), XBD_REQ_OK);
}

static void test_sectors(void)
{
	struct xbd_limits lim = test_limits();
	struct xbd_request q;

	q = rw(BLKIF_OP_READ, 0, 2);
	q.seg[1].first_sect = 3;
	q.seg[1].last_sect = 2;
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_SECTORS);
	q.seg[1].first_sect = 0;
	q.seg[1].last_sect = 8;
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_SECTORS);
	q.seg[1].first_sect = 8;
	q.seg[1].last_sect = 8;
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_SECTORS);
	q.seg[1].first_sect = 200;
	q.seg[1].last_sect = 255;
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_SECTORS);
	q.seg[1].first_sect = 7;
	q.seg[1].last_sect = 7;
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 9);
	q.seg[1].first_sect = 2;
	q.seg[1].last_sect = 5;
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 12);
}

static void test_alignment(void)
{
	struct xbd_limits lim = test_limits();
	struct xbd_request q;

	lim.sector_size = 4096;
	q = rw(BLKIF_OP_READ, 8, 2);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	q = rw(BLKIF_OP_READ, 4, 2);
	CHECK_EQ(run(&q, &lim), XBD_REQ_MISALIGNED);
	q = rw(BLKIF_OP_WRITE, 8, 2);
	q.seg[0].first_sect = 1;
	CHECK_EQ(run(&q, &lim), XBD_REQ_MISALIGNED);
	q = rw(BLKIF_OP_WRITE, 8, 2);
	q.seg[1].last_sect = 6;
	CHECK_EQ(run(&q, &lim), XBD_REQ_MISALIGNED);
	q = indirect(BLKIF_OP_WRITE, 16, 20);
	q.seg[19].last_sect = 3;
	CHECK_EQ(run(&q, &lim), XBD_REQ_MISALIGNED);
	q = discard(8, 16, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	q = discard(8, 12, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_MISALIGNED);
	q = discard(9, 16, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_MISALIGNED);

	lim.sector_size = 1024;
	q = rw(BLKIF_OP_READ, 2, 1);
	q.seg[0].first_sect = 2;
	q.seg[0].last_sect = 5;
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.nr_sectors, 4);
	q.seg[0].first_sect = 1;
	q.seg[0].last_sect = 2;
	CHECK_EQ(run(&q, &lim), XBD_REQ_MISALIGNED);

	/* 512: anything goes. */
	lim.sector_size = 512;
	q = rw(BLKIF_OP_READ, 3, 1);
	q.seg[0].first_sect = 3;
	q.seg[0].last_sect = 3;
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
}

static void test_range(void)
{
	struct xbd_limits lim = test_limits();
	struct xbd_request q;

	lim.nr_sectors = 1000;
	q = rw(BLKIF_OP_READ, 992, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	q = rw(BLKIF_OP_READ, 993, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);
	CHECK_EQ(last_out.nr_sectors, 8); /* known, for the log line */
	q = rw(BLKIF_OP_WRITE, 1000, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);
	q = rw(BLKIF_OP_WRITE, UINT64_MAX - 3, 1); /* start + 8 wraps to 4 */
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);
	q = rw(BLKIF_OP_WRITE_BARRIER, 996, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);
	/* A data-less barrier or flush has no range. */
	q = rw(BLKIF_OP_WRITE_BARRIER, UINT64_MAX, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	q = rw(BLKIF_OP_FLUSH_DISKCACHE, UINT64_MAX, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);

	q = discard(0, 1000, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	q = discard(0, 1001, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);
	q = discard(999, 1, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	q = discard(1000, 1, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);
	q = discard(10, UINT64_MAX, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);
	q = discard(1, UINT64_MAX, 0); /* start + count wraps to 0 */
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);
	q = discard(UINT64_MAX, 2, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);

	/* An empty disk holds nothing. */
	lim.nr_sectors = 0;
	q = rw(BLKIF_OP_READ, 0, 1);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BEYOND_END);
}

static void test_discard(void)
{
	struct xbd_limits lim = test_limits();
	struct xbd_request q;

	q = discard(0, 0, 0);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_DISCARD);
	q = discard(0, 8, 0x2);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_DISCARD);
	q = discard(0, 8, 0x80 | BLKIF_DISCARD_SECURE);
	CHECK_EQ(run(&q, &lim), XBD_REQ_BAD_DISCARD);
	q = discard(0, 8, BLKIF_DISCARD_SECURE);
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.discard_flags, BLKIF_DISCARD_SECURE);
	/* blkif.h: the secure flag is ignored if discard-secure=0. */
	lim.discard_secure = false;
	CHECK_EQ(run(&q, &lim), XBD_REQ_OK);
	CHECK_EQ(last_out.discard_flags, 0);
}

static void test_messages(void)
{
	int e, f;

	CHECK_EQ(xbd_req_error_status(XBD_REQ_OK), BLKIF_RSP_OKAY);
	CHECK_EQ(xbd_req_error_status(XBD_REQ_UNSUPPORTED), BLKIF_RSP_EOPNOTSUPP);
	for (e = 1; e < XBD_REQ_NR_ERRORS; e++) {
		const char *m = xbd_req_strerror((enum xbd_req_error)e);

		CHECK(m != NULL && m[0] != '\0');
		if (e != XBD_REQ_UNSUPPORTED)
			CHECK_EQ(xbd_req_error_status((enum xbd_req_error)e), BLKIF_RSP_ERROR);
		/* A distinct reason per failure, so logs tell them apart. */
		for (f = 0; f < e; f++)
			CHECK(strcmp(m, xbd_req_strerror((enum xbd_req_error)f)) != 0);
	}
	CHECK(strstr(xbd_req_strerror(XBD_REQ_BEYOND_END), "end of disk") != NULL);
	CHECK(xbd_req_strerror(XBD_REQ_NR_ERRORS) != NULL);
	CHECK(xbd_req_strerror((enum xbd_req_error)-1) != NULL);
}

int main(void)
{
	test_ops();
	test_bad_op();
	test_unsupported();
	test_readonly();
	test_nr_segs();
	test_indirect();
	test_sectors();
	test_alignment();
	test_range();
	test_discard();
	test_messages();
	return test_result("test-ring-validate");
}
