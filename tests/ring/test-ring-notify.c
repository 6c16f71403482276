/*
 * test-ring-notify: notification suppression (push-and-check-notify and
 * final-check-for-more-work, both directions), index arithmetic across
 * the 2^32 wrap, and the ring-sanity rules that catch a corrupt producer
 * index.
 */
#include <errno.h>

#include "tests/ring/ring-test.h"

/* A front and a back attached to one shared page, indexes starting at start. */
struct pair {
	void *sring;
	struct xring front;
	struct xring back;
};

static void pair_open(struct pair *p, enum xbd_abi abi, unsigned int nr_pages, uint32_t start)
{
	uint32_t *idx;

	p->sring = test_pages(nr_pages);
	xring_init_shared(p->sring, nr_pages);
	idx = shared_idx(p->sring);
	idx[IDX_REQ_PROD] = start;
	idx[IDX_RSP_PROD] = start;
	idx[IDX_REQ_EVENT] = start + 1;
	idx[IDX_RSP_EVENT] = start + 1;
	CHECK_EQ(xring_attach(&p->front, p->sring, nr_pages, abi, XRING_FRONT), 0);
	CHECK_EQ(xring_attach(&p->back, p->sring, nr_pages, abi, XRING_BACK), 0);
	CHECK_EQ(p->back.req_cons, start);
	CHECK_EQ(p->front.req_prod_pvt, start);
}

static void pair_close(struct pair *p)
{
	free(p->sring);
}

static void put_reads(struct xring *f, unsigned int n, uint64_t first_id)
{
	struct xbd_request q;
	unsigned int i;

	memset(&q, 0, sizeof(q));
	q.operation = BLKIF_OP_READ;
	q.nr_segments = 1;
	q.seg[0].last_sect = 7;
	for (i = 0; i < n; i++) {
		q.id = first_id + i;
		q.sector_number = 8 * (first_id + i);
		CHECK_EQ(xring_front_put_request(f, &q), 0);
	}
}

/* Requests: the frontend notifies only when the backend asked for it. */
static void test_request_notify(uint32_t start)
{
	struct pair p;
	struct xbd_request q[8];
	uint32_t *idx;

	pair_open(&p, XBD_ABI_NATIVE, 1, start);
	idx = shared_idx(p.sring);

	/* Nothing new: no notification. */
	CHECK(!xring_front_push(&p.front));

	/* req_event = start + 1 asks for the first request. */
	put_reads(&p.front, 1, 1);
	CHECK(xring_front_push(&p.front));
	/* The backend has not re-armed: more requests need no kick. */
	put_reads(&p.front, 2, 2);
	CHECK(!xring_front_push(&p.front));

	/* Pending work: final check says so and leaves req_event alone. */
	CHECK(xring_back_final_check(&p.back));
	CHECK_EQ(idx[IDX_REQ_EVENT], start + 1);
	CHECK_EQ(xring_back_consume(&p.back, q, 8), 3);
	CHECK_EQ(q[0].id, 1);
	CHECK_EQ(q[2].id, 3);

	/* Idle: re-arm at req_cons + 1 and report no work. */
	CHECK(!xring_back_final_check(&p.back));
	CHECK_EQ(idx[IDX_REQ_EVENT], start + 4);

	/* A batch of three after re-arming: exactly one notification. */
	put_reads(&p.front, 3, 4);
	CHECK(xring_front_push(&p.front));
	put_reads(&p.front, 1, 7);
	CHECK(!xring_front_push(&p.front));
	CHECK_EQ(xring_back_consume(&p.back, q, 8), 4);

	/*
	 * The event index may sit ahead (a backend asking to be woken only
	 * after several requests): notify exactly when a push crosses it.
	 */
	CHECK(!xring_back_final_check(&p.back));
	idx[IDX_REQ_EVENT] = p.back.req_cons + 3;
	put_reads(&p.front, 2, 8);
	CHECK(!xring_front_push(&p.front));
	put_reads(&p.front, 1, 10);
	CHECK(xring_front_push(&p.front));
	CHECK_EQ(xring_back_consume(&p.back, q, 8), 3);
	pair_close(&p);
}

/* Responses: the backend notifies only when the frontend asked for it. */
static void test_response_notify(uint32_t start)
{
	struct pair p;
	struct xbd_request q[8];
	struct xbd_response rsp[8];
	uint32_t *idx;
	int i, n;

	pair_open(&p, XBD_ABI_X86_32, 1, start);
	idx = shared_idx(p.sring);
	put_reads(&p.front, 6, 100);
	xring_front_push(&p.front);
	n = xring_back_consume(&p.back, q, 8);
	CHECK_EQ(n, 6);

	CHECK(!xring_back_push(&p.back)); /* nothing new */
	xring_back_put_response(&p.back, q[0].id, q[0].raw_operation, BLKIF_RSP_OKAY);
	CHECK(xring_back_push(&p.back)); /* rsp_event = start + 1 */
	xring_back_put_response(&p.back, q[1].id, q[1].raw_operation, BLKIF_RSP_OKAY);
	CHECK(!xring_back_push(&p.back)); /* frontend not re-armed */

	CHECK(xring_front_final_check(&p.front));
	CHECK_EQ(idx[IDX_RSP_EVENT], start + 1);
	CHECK_EQ(xring_front_consume(&p.front, rsp, 8), 2);
	CHECK_EQ(rsp[0].id, 100);
	CHECK_EQ(rsp[1].id, 101);
	CHECK(!xring_front_final_check(&p.front));
	CHECK_EQ(idx[IDX_RSP_EVENT], start + 3);

	for (i = 2; i < 6; i++)
		xring_back_put_response(&p.back, q[i].id, q[i].raw_operation, BLKIF_RSP_ERROR);
	CHECK(xring_back_push(&p.back)); /* one kick for four responses */
	CHECK_EQ(xring_front_consume(&p.front, rsp, 8), 4);
	CHECK_EQ(rsp[3].id, 105);
	CHECK_EQ(rsp[3].status, BLKIF_RSP_ERROR);
	CHECK(!xring_front_final_check(&p.front));
	pair_close(&p);
}

/*
 * The promise of final-check: once it returns false, the next request
 * pushed is either seen or notified.  Checked at every position of a
 * ring that wraps the 32-bit index.
 */
static void test_never_missed(void)
{
	struct pair p;
	struct xbd_request q[40];
	uint32_t start = UINT32_MAX - 100;
	unsigned int round;

	pair_open(&p, XBD_ABI_X86_64, 1, start);
	for (round = 0; round < 200; round++) {
		unsigned int n = 1 + round % 32;

		CHECK(!xring_back_final_check(&p.back));
		put_reads(&p.front, n, round);
		CHECK(xring_front_push(&p.front));
		CHECK(xring_back_final_check(&p.back));
		CHECK_EQ(xring_back_consume(&p.back, q, 40), n);
		CHECK_EQ(q[0].id, round);
		CHECK_EQ(q[n - 1].id, round + n - 1);
		while (n--)
			xring_back_put_response(&p.back, 0, 0, 0);
		xring_back_push(&p.back);
		{
			struct xbd_response rsp[40];

			CHECK_EQ(xring_front_consume(&p.front, rsp, 40), 1 + round % 32);
		}
	}
	/* The indexes really went through zero. */
	CHECK(p.back.req_cons < start);
	pair_close(&p);
}

/* Slots follow the index modulo the ring size, straight through 2^32. */
static void test_wrap_slots(void)
{
	struct pair p;
	struct xbd_request q[4];
	const uint8_t *base;
	uint32_t start = UINT32_MAX - 1; /* slots 30, 31, 0, 1 of 32 */

	pair_open(&p, XBD_ABI_X86_64, 1, start);
	put_reads(&p.front, 4, 0x40);
	CHECK_EQ(xring_front_free(&p.front), 28);
	CHECK(xring_front_push(&p.front));
	CHECK_EQ(shared_idx(p.sring)[IDX_REQ_PROD], 2u);
	base = (const uint8_t *)p.sring + 64;
	CHECK_EQ(base[30 * 112 + 8], 0x40);
	CHECK_EQ(base[31 * 112 + 8], 0x41);
	CHECK_EQ(base[0 * 112 + 8], 0x42);
	CHECK_EQ(base[1 * 112 + 8], 0x43);
	CHECK_EQ(xring_back_pending(&p.back), 4);
	CHECK_EQ(xring_back_consume(&p.back, q, 4), 4);
	CHECK_EQ(q[3].id, 0x43);
	CHECK_EQ(p.back.req_cons, 2u);
	pair_close(&p);
}

/* A full ring: exactly nr_ents requests fit, at any index. */
static void test_full_ring(uint32_t start)
{
	struct pair p;
	struct xbd_request q;
	static struct xbd_request out[64];
	unsigned int i;

	pair_open(&p, XBD_ABI_X86_32, 2, start);
	CHECK_EQ(p.front.nr_ents, 64);
	CHECK_EQ(xring_front_free(&p.front), 64);
	put_reads(&p.front, 64, 0);
	CHECK_EQ(xring_front_free(&p.front), 0);
	memset(&q, 0, sizeof(q));
	CHECK_EQ(xring_front_put_request(&p.front, &q), -ENOSPC);
	xring_front_push(&p.front);
	CHECK_EQ(xring_back_pending(&p.back), 64);
	CHECK_EQ(xring_back_consume(&p.back, out, 64), 64);
	for (i = 0; i < 64; i++)
		CHECK_EQ(out[i].id, i);
	/* Slots free only when responses are consumed, not when requests are. */
	CHECK_EQ(xring_front_free(&p.front), 0);
	xring_back_put_response(&p.back, 0, 0, 0);
	xring_back_push(&p.back);
	{
		struct xbd_response rsp;

		CHECK_EQ(xring_front_consume(&p.front, &rsp, 1), 1);
	}
	CHECK_EQ(xring_front_free(&p.front), 1);
	pair_close(&p);
}

/* Producer indexes that cannot be true are a corrupt ring: -EPROTO. */
static void test_corrupt_indexes(uint32_t start)
{
	struct pair p;
	static struct xbd_request q[64];
	struct xbd_response rsp[4];
	uint32_t *idx;

	pair_open(&p, XBD_ABI_NATIVE, 1, start);
	idx = shared_idx(p.sring);

	/* More unconsumed requests than the ring has slots. */
	idx[IDX_REQ_PROD] = start + 33;
	CHECK_EQ(xring_back_pending(&p.back), -EPROTO);
	CHECK_EQ(xring_back_consume(&p.back, q, 64), -EPROTO);
	CHECK_EQ(p.back.req_cons, start); /* nothing consumed */
	CHECK(xring_back_final_check(&p.back)); /* reported as work to find it */
	/* A producer index behind the consumer. */
	idx[IDX_REQ_PROD] = start - 1;
	CHECK_EQ(xring_back_pending(&p.back), -EPROTO);
	idx[IDX_REQ_PROD] = start + 0x80000000u;
	CHECK_EQ(xring_back_pending(&p.back), -EPROTO);
	/* Exactly full is fine. */
	idx[IDX_REQ_PROD] = start + 32;
	CHECK_EQ(xring_back_pending(&p.back), 32);
	CHECK_EQ(xring_back_consume(&p.back, q, 64), 32);

	/*
	 * 32 requests in flight (consumed, unanswered) still hold their
	 * slots: one more request cannot exist (RING_REQUEST_PROD_OVERFLOW).
	 */
	idx[IDX_REQ_PROD] = start + 33;
	CHECK_EQ(xring_back_pending(&p.back), -EPROTO);
	xring_back_put_response(&p.back, 1, 0, 0);
	CHECK_EQ(xring_back_pending(&p.back), 1);

	/* Frontend side: responses to requests that were never pushed. */
	pair_close(&p);
	pair_open(&p, XBD_ABI_NATIVE, 1, start);
	idx = shared_idx(p.sring);
	put_reads(&p.front, 2, 0);
	xring_front_push(&p.front);
	put_reads(&p.front, 1, 2); /* written, not pushed */
	idx[IDX_RSP_PROD] = start + 3;
	CHECK_EQ(xring_front_consume(&p.front, rsp, 4), -EPROTO);
	CHECK_EQ(p.front.rsp_cons, start);
	CHECK(xring_front_final_check(&p.front));
	idx[IDX_RSP_PROD] = start - 1;
	CHECK_EQ(xring_front_consume(&p.front, rsp, 4), -EPROTO);
	idx[IDX_RSP_PROD] = start + 2;
	CHECK_EQ(xring_front_consume(&p.front, rsp, 4), 2);
	pair_close(&p);
}

/* A backend restarted under a live ring resumes after the last response. */
static void test_reattach(void)
{
	struct pair p;
	struct xring again;
	struct xbd_request q[8];
	uint32_t start = UINT32_MAX - 2;

	pair_open(&p, XBD_ABI_X86_64, 1, start);
	put_reads(&p.front, 5, 10);
	xring_front_push(&p.front);
	CHECK_EQ(xring_back_consume(&p.back, q, 8), 5);
	xring_back_put_response(&p.back, q[0].id, 0, 0);
	xring_back_put_response(&p.back, q[1].id, 0, 0);
	xring_back_push(&p.back);
	/* The old backend dies with three requests unanswered. */
	CHECK_EQ(xring_attach(&again, p.sring, 1, XBD_ABI_X86_64, XRING_BACK), 0);
	CHECK_EQ(xring_back_consume(&again, q, 8), 3);
	CHECK_EQ(q[0].id, 12);
	CHECK_EQ(q[2].id, 14);
	pair_close(&p);
}

int main(void)
{
	static const uint32_t starts[] = { 0, 1000, UINT32_MAX - 1, UINT32_MAX, 0x7fffffff };
	size_t i;

	for (i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		test_request_notify(starts[i]);
		test_response_notify(starts[i]);
		test_full_ring(starts[i]);
		test_corrupt_indexes(starts[i]);
	}
	test_never_missed();
	test_wrap_slots();
	test_reattach();
	return test_result("test-ring-notify");
}
