/*
 * check.c: `xbd-front check`, a conformance run any blkif backend can
 * face.  One line per check ("ok", "FAIL" or "skip" and its name), exit
 * status 1 if any failed.  Destructive: it writes test patterns to the
 * first and last sectors and to the start of the disk.
 *
 * After the checks with the options given, it attaches again with other
 * negotiations (grant-per-request instead of persistent grants, the
 * x86_32 ABI, a single-page single-queue ring, a budget of 32 granted
 * pages), which also checks that the backend lets a frontend close and
 * reconnect.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "blkfront/cli.h"

struct chk {
	struct xbd_front *f;
	struct xbd_front_info in;
	const char *pass;
	unsigned int ok, failed, skipped;
};

enum { OK, FAIL, SKIP };

static void report(struct chk *c, int what, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void report(struct chk *c, int what, const char *name, const char *fmt, ...)
{
	static const char *const tag[] = { "ok  ", "FAIL", "skip" };
	va_list ap;

	printf("%s [%s] %s", tag[what], c->pass, name);
	if (fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
	if (what == OK)
		c->ok++;
	else if (what == FAIL)
		c->failed++;
	else
		c->skipped++;
}

static void pattern(uint8_t *buf, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 9)) ^ (seed >> 3));
}

static int io(struct chk *c, enum xbd_front_op op, unsigned int flags, int queue,
	      uint64_t off, uint64_t len, void *buf)
{
	return xbd_front_io(c->f, op, flags, queue, off, len, buf);
}

/* Write a pattern at off, read it back, compare.  0 or a message in why. */
static int write_read(struct chk *c, unsigned int wflags, int wq, int rq, uint64_t off,
		      uint64_t len, uint32_t seed, char *why, size_t whylen)
{
	uint8_t *w = malloc(len), *r = malloc(len);
	int rc = -ENOMEM;

	if (!w || !r)
		goto out;
	pattern(w, len, seed);
	memset(r, 0xee, len);
	rc = io(c, XBD_FRONT_WRITE, wflags, wq, off, len, w);
	if (rc < 0) {
		snprintf(why, whylen, "write of %" PRIu64 " bytes at %" PRIu64 ": %s", len, off,
			 strerror(-rc));
		goto out;
	}
	rc = io(c, XBD_FRONT_READ, 0, rq, off, len, r);
	if (rc < 0) {
		snprintf(why, whylen, "read of %" PRIu64 " bytes at %" PRIu64 ": %s", len, off,
			 strerror(-rc));
		goto out;
	}
	if (memcmp(w, r, len)) {
		size_t i;

		for (i = 0; i < len && w[i] == r[i]; i++)
			;
		snprintf(why, whylen, "data read back differs at byte %zu of %" PRIu64 " at %" PRIu64,
			 i, len, off);
		rc = -EIO;
	}
out:
	free(w);
	free(r);
	return rc;
}

static void check_rw(struct chk *c, const char *name, unsigned int wflags, int wq, int rq,
		     uint64_t off, uint64_t len, uint32_t seed)
{
	char why[256];

	if (write_read(c, wflags, wq, rq, off, len, seed, why, sizeof(why)) < 0)
		report(c, FAIL, name, "%s", why);
	else
		report(c, OK, name, "%" PRIu64 " bytes at %" PRIu64, len, off);
}

struct conc {
	unsigned int left;
	int err;
};

static void conc_done(void *arg, int result)
{
	struct conc *cc = arg;

	cc->left--;
	if (result < 0 && !cc->err)
		cc->err = result;
}

/* Many requests in flight on every queue at once, then read back. */
static void check_concurrent(struct chk *c)
{
	const unsigned int n = 64;
	uint64_t bs = 8192, span = (uint64_t)n * bs;
	struct conc cc = { .left = 0 };
	uint8_t *w, *r;
	unsigned int i;
	int rc;

	if (span > c->in.size) {
		report(c, SKIP, "concurrent requests on every queue", "disk smaller than %" PRIu64, span);
		return;
	}
	w = malloc(span);
	r = malloc(span);
	if (!w || !r)
		goto out;
	pattern(w, span, 77);
	for (i = 0; i < n; i++) {
		struct xbd_front_req req = {
			.op = XBD_FRONT_WRITE, .queue = (int)(i % c->in.nr_queues),
			.offset = i * bs, .len = bs, .buf = w + i * bs, .cb = conc_done, .arg = &cc,
		};

		if ((rc = xbd_front_submit(c->f, &req)) < 0) {
			cc.err = rc;
			break;
		}
		cc.left++;
	}
	while (cc.left && (rc = xbd_front_run(c->f, 1000)) >= 0)
		;
	for (i = 0; !cc.err && i < n; i++) {
		struct xbd_front_req req = {
			.op = XBD_FRONT_READ, .queue = (int)((i + 1) % c->in.nr_queues),
			.offset = i * bs, .len = bs, .buf = r + i * bs, .cb = conc_done, .arg = &cc,
		};

		if ((rc = xbd_front_submit(c->f, &req)) < 0) {
			cc.err = rc;
			break;
		}
		cc.left++;
	}
	while (cc.left && (rc = xbd_front_run(c->f, 1000)) >= 0)
		;
	if (cc.left)
		report(c, FAIL, "concurrent requests on every queue", "%u never completed", cc.left);
	else if (cc.err)
		report(c, FAIL, "concurrent requests on every queue", "%s", strerror(-cc.err));
	else if (memcmp(w, r, span))
		report(c, FAIL, "concurrent requests on every queue", "data read back differs");
	else
		report(c, OK, "concurrent requests on every queue", "%u x %" PRIu64 " bytes on %u queue(s)",
		       n, bs, c->in.nr_queues);
out:
	free(w);
	free(r);
}

static void check_readonly(struct chk *c)
{
	uint8_t *buf = calloc(1, c->in.sector_size);
	int rc;

	if (!buf)
		return;
	rc = io(c, XBD_FRONT_READ, 0, -1, 0, c->in.sector_size, buf);
	if (rc < 0)
		report(c, FAIL, "read-only: read", "%s", strerror(-rc));
	else
		report(c, OK, "read-only: read", NULL);
	rc = io(c, XBD_FRONT_WRITE, 0, -1, 0, c->in.sector_size, buf);
	report(c, rc == -EROFS ? OK : FAIL, "read-only: library refuses writes",
	       rc == -EROFS ? NULL : "got %s", strerror(-rc));
	/* and the backend itself must refuse one sent anyway */
	rc = io(c, XBD_FRONT_WRITE, XBD_FRONT_NOCHECK, -1, 0, c->in.sector_size, buf);
	report(c, rc < 0 ? OK : FAIL, "read-only: backend refuses writes",
	       rc < 0 ? "answered %s" : "the write was accepted", strerror(-rc));
	free(buf);
}

static void check_flush(struct chk *c)
{
	uint8_t *buf = malloc(c->in.sector_size);
	int rc;

	if (!buf)
		return;
	pattern(buf, c->in.sector_size, 5);
	rc = io(c, XBD_FRONT_WRITE, 0, -1, 0, c->in.sector_size, buf);
	if (rc == 0)
		rc = io(c, XBD_FRONT_FLUSH, 0, -1, 0, 0, NULL);
	if (rc == -EOPNOTSUPP) {
		/* as Linux: the feature is dropped and the next flush completes at once */
		rc = io(c, XBD_FRONT_FLUSH, 0, -1, 0, 0, NULL);
		report(c, rc == 0 ? OK : FAIL, "flush after write",
		       rc == 0 ? "backend answered EOPNOTSUPP: flush dropped" : "after EOPNOTSUPP: %s",
		       strerror(-rc));
		free(buf);
		return;
	}
	if (rc < 0)
		report(c, FAIL, "flush after write", "%s", strerror(-rc));
	else
		report(c, OK, "flush after write", "%s",
		       c->in.flush ? "FLUSH_DISKCACHE" : c->in.barrier ? "WRITE_BARRIER"
								: "no flush offered: completes at once");
	free(buf);
}

static void check_discard(struct chk *c)
{
	uint64_t g = c->in.discard_granularity > c->in.sector_size ? c->in.discard_granularity
								     : c->in.sector_size;
	uint64_t len = g * 4 > 65536 ? g * 4 : 65536, off = len;
	uint8_t *r, *old;
	uint64_t i;
	int rc;

	if (!c->in.discard) {
		uint8_t dummy = 0;

		rc = io(c, XBD_FRONT_DISCARD, 0, -1, 0, c->in.sector_size, &dummy);
		report(c, rc == -EOPNOTSUPP ? OK : FAIL, "discard not offered: refused",
		       rc == -EOPNOTSUPP ? NULL : "got %s", strerror(-rc));
		return;
	}
	if (off + len > c->in.size) {
		report(c, SKIP, "discard then read", "disk too small");
		return;
	}
	r = malloc(len);
	old = malloc(len);
	if (!r || !old)
		goto out;
	pattern(old, len, 9);
	rc = io(c, XBD_FRONT_WRITE, 0, -1, off, len, old);
	if (rc == 0)
		rc = io(c, XBD_FRONT_DISCARD, 0, -1, off, len, NULL);
	if (rc == -EOPNOTSUPP) {
		struct xbd_front_info now;

		xbd_front_info(c->f, &now);
		report(c, now.discard ? FAIL : OK, "discard then read",
		       "backend answered EOPNOTSUPP: discard %s", now.discard ? "still on" : "dropped");
		goto out;
	}
	if (rc == 0)
		rc = io(c, XBD_FRONT_READ, 0, -1, off, len, r);
	if (rc < 0) {
		report(c, FAIL, "discard then read", "%s", strerror(-rc));
		goto out;
	}
	/* a discarded range reads as zeros or (if the backend may ignore it) the old data */
	for (i = 0; i < len; i += c->in.sector_size)
		if (memcmp(r + i, old + i, c->in.sector_size)) {
			uint64_t j;

			for (j = 0; j < c->in.sector_size && r[i + j] == 0; j++)
				;
			if (j != c->in.sector_size) {
				report(c, FAIL, "discard then read",
				       "sector at %" PRIu64 " is neither zeros nor the old data", off + i);
				goto out;
			}
		}
	report(c, OK, "discard then read", "%" PRIu64 " bytes at %" PRIu64, len, off);
out:
	free(r);
	free(old);
}

static void check_range(struct chk *c)
{
	uint8_t *buf = calloc(1, 2 * c->in.sector_size);
	int rc;

	if (!buf)
		return;
	rc = io(c, XBD_FRONT_READ, 0, -1, c->in.size, c->in.sector_size, buf);
	report(c, rc == -EINVAL ? OK : FAIL, "read past the end: library refuses",
	       rc == -EINVAL ? NULL : "got %s", strerror(-rc));
	rc = io(c, XBD_FRONT_READ, XBD_FRONT_NOCHECK, -1, c->in.size - c->in.sector_size,
		2 * c->in.sector_size, buf);
	report(c, rc < 0 ? OK : FAIL, "read past the end: backend refuses",
	       rc < 0 ? "answered %s" : "the read succeeded", strerror(-rc));
	if (c->in.sector_size > 512) {
		/* 512 bytes into a larger logical block */
		rc = io(c, XBD_FRONT_READ, 0, -1, 512, 512, buf);
		report(c, rc == -EINVAL ? OK : FAIL, "misaligned read: library refuses",
		       rc == -EINVAL ? NULL : "got %s", strerror(-rc));
		rc = io(c, XBD_FRONT_READ, XBD_FRONT_NOCHECK, -1, 512, 512, buf);
		report(c, rc < 0 ? OK : FAIL, "misaligned read: backend refuses",
		       rc < 0 ? "answered %s" : "the read succeeded", strerror(-rc));
	}
	free(buf);
}

static void sync_done(void *arg, int result)
{
	int *r = arg;

	*r = result;
}

/* Submit one vectored request and run the loop until it completes. */
static int io_vec(struct chk *c, enum xbd_front_op op, uint64_t off, uint64_t len,
		  const struct iovec *iov, int cnt)
{
	int result = 1, rc;
	struct xbd_front_req req = {
		.op = op, .queue = -1, .offset = off, .len = len, .iov = iov, .iovcnt = cnt,
		.cb = sync_done, .arg = &result,
	};

	rc = xbd_front_submit(c->f, &req);
	while (rc == 0 && result == 1)
		rc = xbd_front_run(c->f, 1000) < 0 ? -EIO : 0;
	return rc < 0 ? rc : result;
}

/* Scattered buffers of odd sizes, written with one split and read with another. */
static void check_vectored(struct chk *c)
{
	const uint64_t len = 2 * XBD_PAGE_SIZE, off = 8 * XBD_PAGE_SIZE;
	uint8_t *w = malloc(len), *r = calloc(1, len);
	struct iovec wv[3], rv[2];
	int rc;

	if (!w || !r || off + len > c->in.size)
		goto out;
	pattern(w, len, 21);
	wv[0] = (struct iovec){ w, 100 };
	wv[1] = (struct iovec){ w + 100, 4000 };
	wv[2] = (struct iovec){ w + 4100, len - 4100 };
	rv[0] = (struct iovec){ r, 1 };
	rv[1] = (struct iovec){ r + 1, len - 1 };
	rc = io_vec(c, XBD_FRONT_WRITE, off, len, wv, 3);
	if (rc == 0)
		rc = io_vec(c, XBD_FRONT_READ, off, len, rv, 2);
	if (rc < 0)
		report(c, FAIL, "vectored write+read", "%s", strerror(-rc));
	else if (memcmp(w, r, len))
		report(c, FAIL, "vectored write+read", "data read back differs");
	else
		report(c, OK, "vectored write+read", "3 buffers out, 2 in");
out:
	free(w);
	free(r);
}

/* The frontend reconnects (Closing, Closed, Initialising) with writes in flight. */
static void check_reconnect(struct chk *c)
{
	const unsigned int n = 32;
	uint64_t bs = 8192, span = (uint64_t)n * bs, base = 16 * XBD_PAGE_SIZE;
	struct xbd_front_stats st0, st1;
	struct conc cc = { .left = 0 };
	uint8_t *w = malloc(span), *r = malloc(span);
	unsigned int i;
	int rc = 0;

	if (!w || !r || base + span > c->in.size)
		goto out;
	pattern(w, span, 99);
	xbd_front_stats(c->f, &st0);
	for (i = 0; i < n; i++) {
		struct xbd_front_req req = {
			.op = XBD_FRONT_WRITE, .queue = (int)(i % c->in.nr_queues),
			.offset = base + i * bs, .len = bs, .buf = w + i * bs, .cb = conc_done, .arg = &cc,
		};

		if ((rc = xbd_front_submit(c->f, &req)) < 0)
			break;
		cc.left++;
	}
	if (rc == 0)
		rc = xbd_front_reconnect(c->f);
	while (cc.left && xbd_front_run(c->f, 1000) >= 0)
		;
	xbd_front_stats(c->f, &st1);
	if (rc < 0) {
		report(c, FAIL, "reconnect with writes in flight", "%s", strerror(-rc));
		goto out;
	}
	if (cc.left || cc.err) {
		report(c, FAIL, "reconnect with writes in flight", "%u never completed, error %s",
		       cc.left, strerror(-cc.err));
		goto out;
	}
	rc = io(c, XBD_FRONT_READ, 0, -1, base, span, r);
	if (rc < 0 || memcmp(w, r, span))
		report(c, FAIL, "reconnect with writes in flight", "read back: %s",
		       rc < 0 ? strerror(-rc) : "data differs");
	else
		report(c, OK, "reconnect with writes in flight", "%u writes, %llu resubmitted",
		       n, (unsigned long long)(st1.resubmitted - st0.resubmitted));
	xbd_front_info(c->f, &c->in);
out:
	free(w);
	free(r);
}

/* The checks of one attachment. */
static void run_checks(struct chk *c)
{
	uint64_t ss = c->in.sector_size, big;
	unsigned int q;
	char name[96];

	report(c, OK, "attach",
	       "%" PRIu64 " sectors, sector-size %u, %u queue(s), ring order %u, %s grants, "
	       "%u indirect segments, flush %s, discard %d, protocol %s",
	       c->in.sectors, c->in.sector_size, c->in.nr_queues, c->in.ring_order,
	       c->in.persistent ? "persistent" : "per-request", c->in.indirect_segs,
	       c->in.flush ? "flush-cache" : c->in.barrier ? "barrier" : "none", c->in.discard,
	       xbd_abi_protocol(c->in.abi));
	if (c->in.sectors == 0 || c->in.size < 2 * ss) {
		report(c, FAIL, "disk size", "%" PRIu64 " bytes", c->in.size);
		return;
	}
	check_range(c);
	if (c->in.readonly) {
		check_readonly(c);
		return;
	}
	report(c, SKIP, "read-only: refuses writes", "the device is writable");
	check_rw(c, "write+read first sector", 0, -1, -1, 0, ss, 1);
	check_rw(c, "write+read last sector", 0, -1, -1, c->in.size - ss, ss, 2);
	check_rw(c, "write+read 3 sectors at sector 1", 0, -1, -1, ss, 3 * ss, 3);
	check_flush(c);
	check_rw(c, "FUA write then read", XBD_FRONT_FUA, -1, -1, 2 * ss, 8 * ss, 4);
	check_discard(c);
	big = (uint64_t)c->in.max_segs * XBD_PAGE_SIZE;
	if (big > c->in.size)
		big = c->in.size / ss * ss;
	snprintf(name, sizeof(name), "largest %s request (%u segments)",
		 c->in.indirect_segs ? "indirect" : "direct", c->in.max_segs);
	check_rw(c, name, 0, -1, -1, 0, big, 6);
	if (c->in.size >= 4 * big)
		check_rw(c, "request split in several", 0, -1, -1, big, 3 * big + ss, 7);
	for (q = 0; q < c->in.nr_queues; q++) {
		snprintf(name, sizeof(name), "queue %u", q);
		check_rw(c, name, 0, (int)q, (int)q, (uint64_t)q * XBD_PAGE_SIZE % (c->in.size - XBD_PAGE_SIZE),
			 XBD_PAGE_SIZE, 10 + q);
	}
	check_vectored(c);
	check_concurrent(c);
	check_reconnect(c);
}

static int one_pass(struct chk *c, const char *pass, const struct xbd_front_opts *opts)
{
	int rc;

	c->pass = pass;
	rc = xbd_front_open(opts, &c->f);
	if (rc < 0) {
		report(c, FAIL, "attach", "%s", strerror(-rc));
		cli_open_failed(opts, rc);
		return rc;
	}
	xbd_front_info(c->f, &c->in);
	run_checks(c);
	xbd_front_close(c->f);
	c->f = NULL;
	report(c, OK, "close", NULL);
	return 0;
}

int cmd_check(int argc, char **argv)
{
	struct xbd_front_opts opts, o;
	struct chk c;
	bool reopen = true, was_persistent;
	int i, rc;

	memset(&c, 0, sizeof(c));
	xbd_front_opts_init(&opts);
	for (i = 1; i < argc; i++) {
		rc = cli_device_option(argc, argv, &i, &opts);
		if (rc < 0)
			return 2;
		if (rc > 0)
			continue;
		if (!strcmp(argv[i], "--no-reopen")) {
			reopen = false;
		} else {
			fprintf(stderr, "xbd-front check: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	/* the largest indirect request the backend offers, not Linux's default */
	if (opts.indirect_segs < 0)
		opts.indirect_segs = XBD_MAX_INDIRECT_SEGS;
	if (one_pass(&c, "default", &opts) < 0)
		goto done;
	was_persistent = c.in.persistent;
	if (reopen) {
		o = opts;
		o.persistent = was_persistent ? 0 : 1;
		one_pass(&c, was_persistent ? "per-request grants" : "persistent requested", &o);
		o = opts;
		o.abi = XBD_ABI_X86_32;
		one_pass(&c, "x86_32-abi", &o);
		o = opts;
		o.ring_order = 0;
		o.max_queues = 1;
		o.indirect_segs = 0;
		one_pass(&c, "1 page, 1 queue, no indirect", &o);
		/* requests wait for grants instead of failing (real Xen's gntalloc limit) */
		o = opts;
		o.max_queues = 1;
		o.max_grants = 32;
		one_pass(&c, "32 grants", &o);
	}
done:
	printf("%s: %u ok, %u failed, %u skipped\n", c.failed ? "FAIL" : "PASS", c.ok, c.failed,
	       c.skipped);
	return c.failed ? 1 : 0;
}
