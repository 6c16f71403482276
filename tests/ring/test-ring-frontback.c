/*
 * test-ring-frontback: a frontend and a backend talking through one shared
 * ring, for each ABI and ring order 0..4: every op, indirect requests with
 * their indirect pages, out-of-order responses, refusals, and enough
 * traffic to go round each ring many times (once from an index just below
 * 2^32).
 */
#include <errno.h>

#include "tests/ring/ring-test.h"

#define MAX_ENTS 512

/* The frontend's record of what it sent, by id. */
struct sent {
	bool outstanding;
	struct xbd_request req;
	int16_t expect_status;
};

static struct sent sent[MAX_ENTS * 2];
static struct xbd_request consumed[MAX_ENTS];
/* Indirect pages, one per possible outstanding request slot. */
static uint8_t ind_pages[MAX_ENTS * 2][XBD_PAGE_SIZE] __attribute__((aligned(4096)));

static uint64_t rng_state;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

/* A random request; one in eight is deliberately refused by the backend. */
static void make_request(struct xbd_request *q, uint64_t id, const struct xbd_limits *lim,
			 int16_t *expect)
{
	unsigned int kind = rnd() % 6, i;
	bool bad = rnd() % 8 == 0;

	memset(q, 0, sizeof(*q));
	q->id = id;
	q->handle = 0x0ca0;
	*expect = BLKIF_RSP_OKAY;
	switch (kind) {
	case 0:
	case 1:
		q->operation = kind == 0 ? BLKIF_OP_READ : BLKIF_OP_WRITE;
		q->nr_segments = (uint16_t)(1 + rnd() % BLKIF_MAX_SEGMENTS_PER_REQUEST);
		break;
	case 2:
		q->operation = BLKIF_OP_WRITE_BARRIER;
		q->nr_segments = (uint16_t)(rnd() % (BLKIF_MAX_SEGMENTS_PER_REQUEST + 1));
		break;
	case 3:
		q->operation = BLKIF_OP_FLUSH_DISKCACHE;
		break;
	case 4:
		q->operation = BLKIF_OP_DISCARD;
		q->sector_number = rnd() % 1000;
		q->nr_sectors = 1 + rnd() % 5000;
		q->discard_flags = rnd() % 2 ? BLKIF_DISCARD_SECURE : 0;
		break;
	default:
		q->operation = rnd() % 2 ? BLKIF_OP_READ : BLKIF_OP_WRITE;
		q->indirect = true;
		q->nr_segments = (uint16_t)(1 + rnd() % lim->max_indirect_segs);
		for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
			q->indirect_grefs[i] = (uint32_t)(id * 8 + i);
		break;
	}
	if (q->operation != BLKIF_OP_DISCARD) {
		q->sector_number = (uint64_t)(rnd() % 100000) * 8;
		for (i = 0; i < q->nr_segments; i++) {
			uint8_t a = (uint8_t)(rnd() % 8), b = (uint8_t)(rnd() % 8);

			q->seg[i].gref = rnd();
			q->seg[i].first_sect = a < b ? a : b;
			q->seg[i].last_sect = a < b ? b : a;
		}
	}
	if (bad) {
		/* Past the end of the disk: an error response, not a crash. */
		q->sector_number = lim->nr_sectors + rnd() % 16;
		if (q->operation == BLKIF_OP_FLUSH_DISKCACHE ||
		    (q->operation == BLKIF_OP_WRITE_BARRIER && q->nr_segments == 0))
			q->operation = 4; /* reserved: refused as an unknown op */
		*expect = BLKIF_RSP_ERROR;
	}
}

/* The copy the backend made equals what the frontend sent. */
static void check_same(const struct xbd_request *got, const struct xbd_request *want,
		       bool with_segs)
{
	unsigned int i, nseg = want->nr_segments;

	CHECK_EQ(got->id, want->id);
	CHECK_EQ(got->operation, want->operation);
	CHECK_EQ(got->indirect, want->indirect);
	CHECK_EQ(got->raw_operation, want->indirect ? BLKIF_OP_INDIRECT : want->operation);
	if (want->operation == BLKIF_OP_DISCARD) {
		CHECK_EQ(got->sector_number, want->sector_number);
		CHECK_EQ(got->nr_sectors, want->nr_sectors);
		return;
	}
	CHECK_EQ(got->handle, want->handle);
	CHECK_EQ(got->sector_number, want->sector_number);
	CHECK_EQ(got->nr_segments, nseg);
	if (want->indirect) {
		for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++)
			CHECK_EQ(got->indirect_grefs[i], want->indirect_grefs[i]);
	}
	for (i = 0; with_segs && i < nseg; i++) {
		CHECK_EQ(got->seg[i].gref, want->seg[i].gref);
		CHECK_EQ(got->seg[i].first_sect, want->seg[i].first_sect);
		CHECK_EQ(got->seg[i].last_sect, want->seg[i].last_sect);
	}
}

static void run(enum xbd_abi abi, unsigned int order, uint32_t start)
{
	unsigned int nr_pages = 1u << order;
	struct xbd_limits lim = test_limits();
	void *sring = test_pages(nr_pages);
	struct xring f, b;
	uint64_t next_id = 0, total = 0, completed = 0, refused = 0;
	uint32_t *idx = shared_idx(sring);
	unsigned int round, nr_ents;

	xring_init_shared(sring, nr_pages);
	idx[IDX_REQ_PROD] = idx[IDX_RSP_PROD] = start;
	idx[IDX_REQ_EVENT] = idx[IDX_RSP_EVENT] = start + 1;
	CHECK_EQ(xring_attach(&f, sring, nr_pages, abi, XRING_FRONT), 0);
	CHECK_EQ(xring_attach(&b, sring, nr_pages, abi, XRING_BACK), 0);
	nr_ents = f.nr_ents;
	CHECK_EQ(nr_ents, 32u << order);
	memset(sent, 0, sizeof(sent));

	/* Ids cycle through 2 * nr_ents so at most one request owns each. */
	for (round = 0; total < 8 * (uint64_t)nr_ents + 64; round++) {
		unsigned int want = 1 + rnd() % nr_ents, i;
		int n, got;

		/* Frontend: submit as many as fit. */
		for (i = 0; i < want && xring_front_free(&f) > 0; i++) {
			uint64_t id = next_id++ % (2 * nr_ents);
			struct sent *s = &sent[id];

			CHECK(!s->outstanding);
			make_request(&s->req, id, &lim, &s->expect_status);
			if (s->req.indirect) {
				void *pages[1] = { ind_pages[id] };

				CHECK_EQ(xring_front_fill_indirect(&s->req, pages), 0);
			}
			CHECK_EQ(xring_front_put_request(&f, &s->req), 0);
			s->outstanding = true;
			total++;
		}
		if (xring_front_free(&f) == 0) {
			struct xbd_request extra;

			memset(&extra, 0, sizeof(extra));
			CHECK_EQ(xring_front_put_request(&f, &extra), -ENOSPC);
		}
		xring_front_push(&f);

		/* Backend: consume in a few batches, answer newest first. */
		while ((n = xring_back_consume(&b, consumed, 1 + rnd() % nr_ents)) > 0) {
			for (i = 0; i < (unsigned int)n; i++) {
				struct xbd_request *q = &consumed[i];
				enum xbd_req_error e;

				CHECK(q->id < 2 * nr_ents);
				if (q->id >= 2 * nr_ents)
					return;
				check_same(q, &sent[q->id].req, !q->indirect);
				e = xbd_req_check_indirect(q, &lim);
				if (e == XBD_REQ_OK && q->indirect) {
					const void *pages[1] = { ind_pages[q->id] };

					xbd_req_load_indirect(q, pages);
					check_same(q, &sent[q->id].req, true);
				}
				if (e == XBD_REQ_OK)
					e = xbd_req_validate(q, &lim);
				if (e != XBD_REQ_OK)
					refused++;
				q->nr_sectors = (uint64_t)xbd_req_error_status(e);
			}
			for (i = (unsigned int)n; i-- > 0;)
				xring_back_put_response(&b, consumed[i].id, consumed[i].raw_operation,
							(int16_t)consumed[i].nr_sectors);
			xring_back_push(&b);
		}
		CHECK_EQ(n, 0);
		CHECK(!xring_back_final_check(&b));

		/* Frontend: every response matches one outstanding request. */
		{
			struct xbd_response rsp[64];

			while ((got = xring_front_consume(&f, rsp, 64)) > 0) {
				for (i = 0; i < (unsigned int)got; i++) {
					struct sent *s;

					CHECK(rsp[i].id < 2 * nr_ents);
					if (rsp[i].id >= 2 * nr_ents)
						return;
					s = &sent[rsp[i].id];
					CHECK(s->outstanding);
					CHECK_EQ(rsp[i].operation, s->req.indirect ? BLKIF_OP_INDIRECT
										   : s->req.operation);
					CHECK_EQ(rsp[i].status, s->expect_status);
					s->outstanding = false;
					completed++;
				}
			}
			CHECK_EQ(got, 0);
			CHECK(!xring_front_final_check(&f));
		}
		CHECK_EQ(xring_front_free(&f), nr_ents);
	}
	CHECK_EQ(completed, total);
	CHECK(refused > 0 && refused < total);
	CHECK_EQ((uint32_t)(b.req_cons - start), (uint32_t)total);
	printf("%s order %u start %#x: %llu requests, %llu refused, %u rounds\n",
	       test_abi_names[abi], order, start, (unsigned long long)total,
	       (unsigned long long)refused, round);
	free(sring);
}

int main(void)
{
	size_t a;
	unsigned int order;

	rng_state = 0x9e3779b97f4a7c15ull;
	for (a = 0; a < 3; a++) {
		for (order = 0; order <= XBD_RING_MAX_ORDER; order++) {
			run(test_abis[a], order, 0);
			run(test_abis[a], order, UINT32_MAX - 7 - 3 * order);
		}
	}
	return test_result("test-ring-frontback");
}
