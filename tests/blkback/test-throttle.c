/*
 * test-throttle: the I/O limits' buckets (blkback/datapath/throttle.c) on a clock
 * the test drives, so that what is measured is the arithmetic, not how
 * fast this machine runs: a greedy disk asks again exactly when the
 * limiter said it may, and what passed in each window is counted.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkback/settings/options.h"
#include "blkback/datapath/throttle.h"

#define SEC 1000000000ull

static int failures;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		failures++; \
	} \
} while (0)

static struct xbd_iolimits conf(void)
{
	struct xbd_iolimits c;

	memset(&c, 0, sizeof(c));
	return c;
}

/*
 * A disk that always has a request of this kind waiting, from t0 for
 * len ns: the requests that passed (and their bytes in *bytes_out).
 * The clock only moves to the times the limiter names.
 */
static unsigned long greedy(struct xbd_throttle *t, enum xbd_throttle_op op, uint64_t bytes,
			    uint64_t t0, uint64_t len)
{
	uint64_t now = t0, due;
	unsigned long n = 0;

	while (now < t0 + len) {
		if (xbd_throttle_take(t, op, bytes, false, now, &due)) {
			n++;
		} else {
			if (due <= now) {
				CHECK(0, "a refusal must name a later time (%llu <= %llu)",
				      (unsigned long long)due, (unsigned long long)now);
				return n;
			}
			now = due;
		}
	}
	return n;
}

static void test_iops(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle *t;
	unsigned long first, later;

	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 100;
	t = xbd_throttle_get(0, 1, NULL, &c, NULL, 0, "test");
	CHECK(t && xbd_throttle_active(t), "a limit set: active");
	/* Its first second: the rate plus one bucket (a tenth of a second). */
	first = greedy(t, XBD_THR_READ, 4096, SEC, SEC);
	CHECK(first >= 100 && first <= 111, "iops-total 100, first second: %lu", first);
	/* Then exactly the rate, window after window. */
	later = greedy(t, XBD_THR_WRITE, 4096, 2 * SEC, 10 * SEC);
	CHECK(later >= 995 && later <= 1005, "iops-total 100 over 10 s: %lu", later);
	xbd_throttle_put(t, false);
}

static void test_bps_large_requests(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle *t;
	unsigned long n;

	/* 1 MiB requests under 256 KiB/s: each larger than the bucket, still exactly the rate. */
	c.l[XBD_IOLIMIT_BPS_READ].avg = 262144;
	t = xbd_throttle_get(0, 1, NULL, &c, NULL, 0, "test");
	n = greedy(t, XBD_THR_READ, 1048576, SEC, 40 * SEC);
	CHECK(n >= 10 && n <= 11, "bps-read 256 KiB/s, 1 MiB reads over 40 s: %lu", n);
	xbd_throttle_put(t, false);
}

static void test_kinds(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle *t;
	uint64_t due;
	unsigned int i, passed;

	c.l[XBD_IOLIMIT_IOPS_READ].avg = 50;
	c.l[XBD_IOLIMIT_BPS_WRITE].avg = 4096;
	t = xbd_throttle_get(0, 1, NULL, &c, NULL, 0, "test");
	/* Writes pass the read limit, reads pass the write limit. */
	for (i = 0, passed = 0; i < 20; i++)
		passed += xbd_throttle_take(t, XBD_THR_READ, 0, false, SEC, &due);
	CHECK(passed == 5, "iops-read 50: a bucket of 5 at once, got %u", passed);
	/* A flush or discard is a write operation without bytes: bps-write lets it through. */
	for (i = 0, passed = 0; i < 1000; i++)
		passed += xbd_throttle_take(t, XBD_THR_OTHER_WRITE, 0, false, SEC, &due);
	CHECK(passed == 1000, "bps-write does not hold flushes: %u of 1000", passed);
	/* 4 KiB writes against 4 KiB/s: the first (bucket empty), then one a second. */
	passed = (unsigned int)greedy(t, XBD_THR_WRITE, 4096, SEC, 5 * SEC);
	CHECK(passed >= 5 && passed <= 6, "bps-write 4096, 4 KiB writes over 5 s: %u", passed);
	xbd_throttle_put(t, false);

	/* iops-write: a flush counts. */
	c = conf();
	c.l[XBD_IOLIMIT_IOPS_WRITE].avg = 10;
	t = xbd_throttle_get(0, 1, NULL, &c, NULL, 0, "test");
	passed = (unsigned int)greedy(t, XBD_THR_OTHER_WRITE, 0, SEC, 10 * SEC);
	CHECK(passed >= 100 && passed <= 102, "iops-write 10, flushes over 10 s: %u", passed);
	xbd_throttle_put(t, false);
}

static void test_iops_size(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle *t;
	unsigned long n;

	/* 64 KiB requests count 16 operations of 4 KiB each. */
	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 1600;
	c.iops_size = 4096;
	t = xbd_throttle_get(0, 1, NULL, &c, NULL, 0, "test");
	n = greedy(t, XBD_THR_READ, 65536, SEC, 10 * SEC);
	CHECK(n >= 999 && n <= 1012, "iops-total 1600, iops-size 4096, 64 KiB over 10 s: %lu", n);
	xbd_throttle_put(t, false);
}

static void test_burst(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle *t;
	unsigned long b1, b2, after;

	/* 100/s, bursts of 1000/s for 2 s: the burst, held at its own rate, then the limit. */
	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 100;
	c.l[XBD_IOLIMIT_IOPS_TOTAL].max = 1000;
	c.l[XBD_IOLIMIT_IOPS_TOTAL].max_length = 2;
	t = xbd_throttle_get(0, 1, NULL, &c, NULL, 0, "test");
	b1 = greedy(t, XBD_THR_READ, 4096, SEC, SEC);
	b2 = greedy(t, XBD_THR_READ, 4096, 2 * SEC, SEC);
	CHECK(b1 >= 1000 && b1 <= 1110, "burst 1000/s, first second: %lu", b1);
	CHECK(b2 >= 1000 && b2 <= 1110, "burst 1000/s for 2 s, second second: %lu", b2);
	/* The rest of the burst (it lasts about max x length / (max - limit) s), then the limit. */
	greedy(t, XBD_THR_READ, 4096, 3 * SEC, 2 * SEC);
	after = greedy(t, XBD_THR_READ, 4096, 5 * SEC, 10 * SEC);
	CHECK(after >= 995 && after <= 1005, "after the burst, 100/s over 10 s: %lu", after);
	/* Idle long enough to save a burst up again: it comes back. */
	b1 = greedy(t, XBD_THR_READ, 4096, 60 * SEC, SEC);
	CHECK(b1 >= 1000, "a burst after 45 s idle: %lu in its first second", b1);
	xbd_throttle_put(t, false);
}

static void test_runtime_change(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle *t;
	unsigned long n;

	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 1000;
	t = xbd_throttle_get(0, 1, NULL, &c, NULL, 0, "test");
	n = greedy(t, XBD_THR_READ, 4096, SEC, 10 * SEC);
	CHECK(n >= 9995 && n <= 10105, "1000/s over 10 s: %lu", n);
	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 10;
	xbd_throttle_set(t, &c);
	n = greedy(t, XBD_THR_READ, 4096, 12 * SEC, 10 * SEC);
	CHECK(n >= 99 && n <= 102, "set to 10/s, over 10 s: %lu", n);
	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 0;
	xbd_throttle_set(t, &c);
	CHECK(!xbd_throttle_active(t), "no limit left: inactive");
	xbd_throttle_put(t, false);
}

static void test_groups(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle *a, *b, *other, *own;
	unsigned long na, nb;
	uint64_t now, due;

	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 200;
	a = xbd_throttle_get(3, 1, "g", &c, NULL, 0, "vbd/3/1");
	b = xbd_throttle_get(3, 2, "g", &c, NULL, 0, "vbd/3/2");
	other = xbd_throttle_get(4, 1, "g", &c, NULL, 0, "vbd/4/1");
	own = xbd_throttle_get(3, 3, NULL, &c, NULL, 0, "vbd/3/3");
	CHECK(a == b, "one domain, one group name: one limiter");
	CHECK(a != other, "another domain's group of that name is its own");
	CHECK(a != own, "no group: a limiter of its own");
	/*
	 * Two greedy disks sharing it, each asking again when told to (who
	 * asks first at the same instant alternates, as two threads racing
	 * for the lock would): together they get the group's rate.
	 */
	na = nb = 0;
	for (uint64_t ta = SEC, tb = SEC; (ta < tb ? ta : tb) < 11 * SEC;) {
		bool first_a = ta < tb || (ta == tb && (na + nb) % 2 == 0);

		now = first_a ? ta : tb;
		if (xbd_throttle_take(first_a ? a : b, XBD_THR_READ, 4096, false, now, &due))
			*(first_a ? &na : &nb) += 1;
		else
			*(first_a ? &ta : &tb) = due;
	}
	CHECK(na + nb >= 1995 && na + nb <= 2025, "group of 200/s, two disks over 10 s: %lu",
	      na + nb);
	CHECK(na >= 900 && nb >= 900, "shared evenly between two greedy disks: %lu, %lu", na, nb);
	/* The group outlives its first disk, and goes with its last. */
	xbd_throttle_put(a, false);
	CHECK(xbd_throttle_get(3, 4, "g", &c, NULL, 0, "vbd/3/4") == b, "the group stays while a disk has it");
	xbd_throttle_put(b, false);
	xbd_throttle_put(b, false);
	xbd_throttle_put(other, false);
	xbd_throttle_put(own, false);
}

static void test_kept(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle *t, *again;
	unsigned long n;

	/* A disk that connects again finds its buckets as it left them: no fresh burst. */
	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 100;
	c.l[XBD_IOLIMIT_IOPS_TOTAL].max = 1000;
	t = xbd_throttle_get(7, 51712, NULL, &c, NULL, 0, "vbd/7/51712");
	n = greedy(t, XBD_THR_READ, 4096, SEC, 3 * SEC);
	CHECK(n >= 1000, "the first connection's burst: %lu in 3 s", n);
	xbd_throttle_put(t, true);
	again = xbd_throttle_get(7, 51712, NULL, &c, NULL, 0, "vbd/7/51712");
	CHECK(again == t, "the disk's own limiter, kept");
	n = greedy(again, XBD_THR_READ, 4096, 4 * SEC, 2 * SEC);
	CHECK(n <= 230, "connecting again gave %lu in 2 s: a fresh burst", n);
	xbd_throttle_put(again, false);
}

static void test_mixed_sizes(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle *t;
	uint64_t now = SEC, due, small_next = SEC, big_next = SEC;
	unsigned long small = 0, big = 0;

	/*
	 * Two rings of one disk: one keeps 4 KiB requests coming, the other
	 * has a 1 MiB one (256 operations under iops-size 4096, more than
	 * the bucket of 100).  The large one gets in within a second or so,
	 * again and again: the small stream does not keep it out.
	 */
	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 1000;
	c.iops_size = 4096;
	t = xbd_throttle_get(0, 1, NULL, &c, NULL, 0, "test");
	while (now < 11 * SEC) {
		bool is_big = big_next <= small_next;

		now = is_big ? big_next : small_next;
		if (xbd_throttle_take(t, XBD_THR_READ, is_big ? 1048576 : 4096, false, now, &due))
			*(is_big ? &big : &small) += 1;
		else
			*(is_big ? &big_next : &small_next) = due;
	}
	CHECK(big >= 5, "a 1 MiB request beside a 4 KiB stream got in %lu times in 10 s", big);
	CHECK(small + big * 256 >= 9900 && small + big * 256 <= 10500,
	      "1000 operations a second in all: %lu small + %lu large", small, big);
	xbd_throttle_put(t, false);
}

static void test_forced_and_state(void)
{
	struct xbd_iolimits c = conf();
	struct xbd_throttle_state st;
	struct xbd_throttle *t;
	uint64_t due;
	unsigned long n;

	/* A stopping ring's requests go at once, and still count. */
	c.l[XBD_IOLIMIT_IOPS_TOTAL].avg = 100;
	t = xbd_throttle_get(0, 1, NULL, &c, NULL, 0, "test");
	for (int i = 0; i < 200; i++)
		CHECK(xbd_throttle_take(t, XBD_THR_READ, 4096, true, SEC, &due), "forced");
	n = greedy(t, XBD_THR_READ, 4096, SEC, SEC);
	CHECK(n == 0, "after 200 forced at 100/s, %lu more within the second", n);
	/* Its state, saved and given to a new limiter: the same debt. */
	xbd_throttle_save(t, &st);
	xbd_throttle_put(t, false);
	t = xbd_throttle_get(0, 1, NULL, &c, &st, SEC, "test");
	n = greedy(t, XBD_THR_READ, 4096, SEC, SEC);
	CHECK(n == 0, "a state handed over kept its level: %lu", n);
	xbd_throttle_put(t, false);
	/* A state a worker made up: not a number, negative, a time far ahead: harmless. */
	for (unsigned int k = 0; k < XBD_IOLIMIT_KINDS; k++) {
		st.level[k] = k % 2 ? -1e300 : NAN;
		st.burst[k] = 1e308;
	}
	st.at_ns = UINT64_MAX;
	t = xbd_throttle_get(0, 1, NULL, &c, &st, 2 * SEC, "test");
	n = greedy(t, XBD_THR_READ, 4096, 3 * SEC, 10 * SEC);
	CHECK(n >= 995 && n <= 1011, "after a bogus state, 100/s over 10 s: %lu", n);
	xbd_throttle_put(t, false);
}

static void test_check(void)
{
	struct xbd_disk_opts o;
	char err[200];

	memset(&o, 0, sizeof(o));
	CHECK(!xbd_iolimits_check(&o, err, sizeof(err)), "no limits: fine");
	o.limit[XBD_IOLIMIT_BPS_TOTAL] = 1000;
	o.limit_max[XBD_IOLIMIT_BPS_TOTAL] = 500;
	CHECK(xbd_iolimits_check(&o, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "bps-total-max = 500 is below bps-total = 1000"),
	      "a burst below its limit: %s", err);
	o.limit[XBD_IOLIMIT_BPS_TOTAL] = 0;
	CHECK(xbd_iolimits_check(&o, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "bps-total-max = 500 needs bps-total"), "a burst alone: %s", err);
}

int main(void)
{
	test_iops();
	test_bps_large_requests();
	test_kinds();
	test_iops_size();
	test_burst();
	test_runtime_change();
	test_groups();
	test_kept();
	test_mixed_sizes();
	test_forced_and_state();
	test_check();
	if (failures) {
		fprintf(stderr, "test-throttle: %d failed\n", failures);
		return 1;
	}
	printf("test-throttle: all passed\n");
	return 0;
}
