/*
 * test-latency: the latency histograms of stats.c.  Bucket bounds (a
 * latency of exactly 2^k ns goes to the bucket whose bound is 2^k),
 * quantiles of known distributions, the pending list filling up between
 * two pushes, sums keeping the largest maximum, and JSON/Prometheus
 * shapes are checked by the shell tests.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/datapath/stats.h"

static int failures;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                      \
		}                                                                        \
	} while (0)

/* n responses of op, each lat_ns long, pushed together. */
static void answer(struct xbd_ring_stats *s, uint8_t op, uint64_t lat_ns, unsigned int n)
{
	struct xbd_lat_pending p = { 0 };
	const uint64_t now = 1000000000000ull;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (p.n == XBD_LAT_PENDING)
			xbd_lat_record(&p, s, now);
		xbd_lat_note(&p, s, op, now - lat_ns);
	}
	xbd_lat_record(&p, s, now);
	CHECK(p.n == 0);
}

static unsigned int bucket_of(uint64_t lat_ns)
{
	struct xbd_ring_stats s;
	unsigned int b;

	memset(&s, 0, sizeof(s));
	answer(&s, BLKIF_OP_READ, lat_ns, 1);
	for (b = 0; b < XBD_LAT_BUCKETS; b++)
		if (s.lat[XBD_LAT_READ].bucket[b])
			return b;
	return ~0u;
}

int main(void)
{
	struct xbd_ring_stats s, t;
	unsigned int b;

	/* Bounds: <= 1024 ns in bucket 0, 1025..2048 in 1, ... the rest in the last. */
	CHECK(xbd_lat_bucket_le_ns(0) == 1024);
	CHECK(xbd_lat_bucket_le_ns(1) == 2048);
	CHECK(xbd_lat_bucket_le_ns(XBD_LAT_BUCKETS - 2) == UINT64_C(1) << 36);
	CHECK(xbd_lat_bucket_le_ns(XBD_LAT_BUCKETS - 1) == UINT64_MAX);
	CHECK(bucket_of(0) == 0);
	CHECK(bucket_of(1) == 0);
	CHECK(bucket_of(1024) == 0);
	CHECK(bucket_of(1025) == 1);
	CHECK(bucket_of(2048) == 1);
	CHECK(bucket_of(2049) == 2);
	CHECK(bucket_of(1000000) == 10);           /* 1 ms: 2^19 < 10^6 <= 2^20 */
	CHECK(bucket_of(UINT64_C(1) << 36) == XBD_LAT_BUCKETS - 2);
	CHECK(bucket_of((UINT64_C(1) << 36) + 1) == XBD_LAT_BUCKETS - 1);
	CHECK(bucket_of(UINT64_C(1) << 39) == XBD_LAT_BUCKETS - 1);

	/* Every op has its own histogram; unknown ops are not recorded. */
	memset(&s, 0, sizeof(s));
	answer(&s, BLKIF_OP_READ, 5000, 3);
	answer(&s, BLKIF_OP_WRITE, 9000, 2);
	answer(&s, BLKIF_OP_FLUSH_DISKCACHE, 100000, 1);
	answer(&s, BLKIF_OP_DISCARD, 100, 4);
	answer(&s, BLKIF_OP_WRITE_BARRIER, 2000000, 5);
	answer(&s, 99, 7000, 6);
	CHECK(xbd_lat_count(&s.lat[XBD_LAT_READ]) == 3);
	CHECK(xbd_lat_count(&s.lat[XBD_LAT_WRITE]) == 2);
	CHECK(xbd_lat_count(&s.lat[XBD_LAT_FLUSH]) == 1);
	CHECK(xbd_lat_count(&s.lat[XBD_LAT_DISCARD]) == 4);
	CHECK(xbd_lat_count(&s.lat[XBD_LAT_BARRIER]) == 5);
	CHECK(s.lat[XBD_LAT_READ].sum_ns == 15000 && s.lat[XBD_LAT_READ].max_ns == 5000);
	CHECK(s.lat[XBD_LAT_BARRIER].sum_ns == 10000000);
	CHECK(!strcmp(xbd_lat_op_name(XBD_LAT_FLUSH), "flush"));

	/*
	 * Quantiles: 900 reads of 10 us and 100 of 1 ms.  p50 lies in 10 us's
	 * bucket (8.192..16.384 us), p99 and p99.9 in 1 ms's (524..1049 us,
	 * capped at the max, 1 ms).
	 */
	memset(&s, 0, sizeof(s));
	answer(&s, BLKIF_OP_READ, 10000, 900);
	answer(&s, BLKIF_OP_READ, 1000000, 100);
	{
		const struct xbd_lat_hist *h = &s.lat[XBD_LAT_READ];
		uint64_t p50 = xbd_lat_quantile(h, 0.5), p99 = xbd_lat_quantile(h, 0.99);
		uint64_t p999 = xbd_lat_quantile(h, 0.999), p100 = xbd_lat_quantile(h, 1.0);

		printf("p50 %" PRIu64 " p99 %" PRIu64 " p99.9 %" PRIu64 " p100 %" PRIu64 " max %"
		       PRIu64 "\n", p50, p99, p999, p100, h->max_ns);
		CHECK(p50 > 8192 && p50 <= 16384);
		CHECK(p99 > 524288 && p99 <= 1000000);
		CHECK(p999 >= p99 && p999 <= 1000000);
		CHECK(p100 == 1000000);
		CHECK(h->max_ns == 1000000);
		/* p90 is the 900th: still the 10 us bucket. */
		CHECK(xbd_lat_quantile(h, 0.9) <= 16384);
		CHECK(xbd_lat_quantile(h, 0.901) > 524288);
	}
	memset(&t, 0, sizeof(t));
	CHECK(xbd_lat_quantile(&t.lat[XBD_LAT_READ], 0.5) == 0);

	/* Sums add buckets and sums, and keep the largest maximum. */
	memset(&t, 0, sizeof(t));
	answer(&t, BLKIF_OP_READ, 3000000, 1);
	answer(&t, BLKIF_OP_WRITE, 10, 1);
	xbd_stats_sum(&t, &s);
	CHECK(xbd_lat_count(&t.lat[XBD_LAT_READ]) == 1001);
	CHECK(t.lat[XBD_LAT_READ].max_ns == 3000000);
	CHECK(t.lat[XBD_LAT_WRITE].max_ns == 10);
	CHECK(t.lat[XBD_LAT_READ].sum_ns == 3000000 + 900 * 10000ull + 100 * 1000000ull);
	for (b = 0; b < XBD_LAT_BUCKETS; b++)
		CHECK(t.lat[XBD_LAT_READ].bucket[b] >= s.lat[XBD_LAT_READ].bucket[b]);

	/* A full pending list records early and loses nothing. */
	{
		struct xbd_lat_pending p = { 0 };
		unsigned int i;

		memset(&s, 0, sizeof(s));
		for (i = 0; i < 3 * XBD_LAT_PENDING + 5; i++)
			xbd_lat_note(&p, &s, BLKIF_OP_WRITE, 1);
		CHECK(p.n == 5);
		CHECK(xbd_lat_count(&s.lat[XBD_LAT_WRITE]) == 3 * XBD_LAT_PENDING);
		xbd_lat_record(&p, &s, 2);
		CHECK(xbd_lat_count(&s.lat[XBD_LAT_WRITE]) == 3 * XBD_LAT_PENDING + 5);
	}
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
