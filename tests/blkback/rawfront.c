/*
 * rawfront.c: a test frontend that acts as a domU (XBD_SIM_DOMID) and talks
 * blkif to a vbd backend through ring.h, platform.h and xenbus.h directly,
 * so that it can break every rule on purpose.  It connects (tests/lib/
 * testfront.c: grants the ring pages, allocates event channels, writes
 * ring-ref/event-channel/protocol and state=3, waits for the backend's
 * state 4) and runs one scenario of the table at the end of this file
 * (rawfront --help lists them); the exit status says whether the backend
 * behaved (0) or not (1).
 *
 *   rawfront [--dev DEVID] [--order N] [--num-ring-pages N] [--queues N]
 *            [--abi native|x86_32|x86_64] [--persistent 0|1] [--secs S]
 *            [--qd N] [--state 3|4] [--order-per-queue] SCENARIO
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/testfront.h"

#define POOL_PAGES TF_POOL_MAX /* 1200 data pages */

static double secs = 1.0;   /* --secs: how long flood, stress and bench run */
static unsigned int qd = 1; /* --qd: requests in flight in stress and bench */

/* ---- requests ---- */

/* Write a raw native blkif_request, bypassing every check of ring.h. */
static void *raw_slot(struct tf *f, unsigned int qi)
{
	struct xring *r = &f->q[qi].ring;

	return (char *)r->sring + offsetof(struct blkif_sring, ring) +
	       (size_t)(r->req_prod_pvt & (r->nr_ents - 1)) * r->ent_size;
}

static int16_t raw_submit_wait(struct tf *f, unsigned int qi, const void *req, size_t len)
{
	char *slot = raw_slot(f, qi);
	uint64_t id = f->next_id++;

	if (len > f->q[qi].ring.ent_size)
		len = f->q[qi].ring.ent_size;
	memcpy(slot, req, len);
	/* The id sits at offset 8, or 4 in the packed x86_32 layout. */
	memcpy(slot + (f->abi == XBD_ABI_X86_32 ? 4 : 8), &id, sizeof(id));
	f->q[qi].ring.req_prod_pvt++;
	tf_kick(f, qi);
	return tf_wait_rsp(f, qi, id);
}

static void pattern(void *buf, uint64_t sector, unsigned int nsect, unsigned int seed)
{
	uint64_t *w = buf;
	unsigned int s, j;

	for (s = 0; s < nsect; s++)
		for (j = 0; j < 64; j++)
			w[s * 64 + j] = (sector + s) * 0x9E3779B97F4A7C15ull ^ (j + seed * 0x100000001ull);
}

/* A read or write of npages whole pages from pool page pg, direct or indirect. */
static int16_t io(struct tf *f, unsigned int qi, uint8_t op, uint64_t sector, unsigned int npages,
		  unsigned int pg, bool indirect)
{
	static struct xbd_request r;
	unsigned int i;

	memset(&r, 0, sizeof(r));
	r.operation = op;
	r.sector_number = sector;
	r.nr_segments = npages;
	if (indirect) {
		/* The segment list lives in pool page POOL_PAGES-1. */
		struct blkif_request_segment *seg = (void *)tf_page(f, POOL_PAGES - 1);

		for (i = 0; i < npages; i++) {
			seg[i].gref = f->pool_refs[pg + i];
			seg[i].first_sect = 0;
			seg[i].last_sect = 7;
		}
		r.indirect = true;
		r.indirect_grefs[0] = f->pool_refs[POOL_PAGES - 1];
	} else {
		for (i = 0; i < npages; i++) {
			r.seg[i].gref = f->pool_refs[pg + i];
			r.seg[i].first_sect = 0;
			r.seg[i].last_sect = 7;
		}
	}
	return tf_submit(f, qi, &r);
}

/* Write a pattern at sector, read it back through other pages, compare. */
static void write_read_verify(struct tf *f, unsigned int qi, uint64_t sector, unsigned int npages,
			      bool indirect, unsigned int seed)
{
	unsigned int per = indirect ? npages : (npages > 11 ? 11 : npages), done;

	pattern(tf_page(f, 0), sector, npages * 8, seed);
	for (done = 0; done < npages; done += per)
		tf_expect(io(f, qi, BLKIF_OP_WRITE, sector + done * 8ull,
			     npages - done < per ? npages - done : per, done, indirect),
			  BLKIF_RSP_OKAY, "write");
	memset(tf_page(f, 280), 0xee, (size_t)npages * XBD_PAGE_SIZE);
	for (done = 0; done < npages; done += per)
		tf_expect(io(f, qi, BLKIF_OP_READ, sector + done * 8ull,
			     npages - done < per ? npages - done : per, 280 + done, indirect),
			  BLKIF_RSP_OKAY, "read");
	if (memcmp(tf_page(f, 0), tf_page(f, 280), (size_t)npages * XBD_PAGE_SIZE))
		tf_die("data read back differs from data written (sector %" PRIu64 ", %u pages)", sector,
		       npages);
	tf_say("verified %u pages at sector %" PRIu64 " on queue %u", npages, sector, qi);
}

/* Sub-page segments: sectors 1..3 of one page and 5..7 of another. */
static void partial_segments(struct tf *f)
{
	struct xbd_request r;
	char *a = tf_page(f, 0), *b = tf_page(f, 1);

	pattern(a + 512, 1000, 3, 7);
	pattern(b + 5 * 512, 1003, 3, 7);
	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_WRITE;
	r.sector_number = 1000;
	r.nr_segments = 2;
	r.seg[0] = (struct xbd_seg){ f->pool_refs[0], 1, 3 };
	r.seg[1] = (struct xbd_seg){ f->pool_refs[1], 5, 7 };
	tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_OKAY, "partial-segment write");
	memset(tf_page(f, 2), 0, XBD_PAGE_SIZE);
	tf_expect(io(f, 0, BLKIF_OP_READ, 1000, 1, 2, false), BLKIF_RSP_OKAY, "read");
	if (memcmp(tf_page(f, 2), a + 512, 3 * 512) || memcmp(tf_page(f, 2) + 3 * 512, b + 5 * 512, 3 * 512))
		tf_die("partial segments read back wrong");
	tf_say("partial segments verified");
}

/* ---- scenarios ---- */

static void sc_rw(struct tf *f)
{
	unsigned int qi;

	for (qi = 0; qi < f->nq; qi++) {
		write_read_verify(f, qi, 8 + qi * 256, 1, false, 1 + qi);
		write_read_verify(f, qi, 64 + qi * 256, 11, false, 2 + qi);
		write_read_verify(f, qi, 128 + qi * 256, 24, false, 3 + qi);
	}
	partial_segments(f);
	/* The last sectors of the disk. */
	write_read_verify(f, 0, f->sectors - 16, 2, false, 9);
}

/*
 * Storage that goes away and comes back (engine-nbd.sh stops and starts
 * the NBD server meanwhile): for --secs, write a page and read it back
 * every 20 ms.  Passes when some request failed (BLKIF_RSP_ERROR), none
 * took more than 5 s, and the ones after the last failure verified.
 */
static void sc_outage(struct tf *f)
{
	uint64_t end = xbd_mono_ms() + (uint64_t)(secs * 1000), worst = 0;
	unsigned int n, ok = 0, failed = 0, ok_after = 0;

	for (n = 0; xbd_mono_ms() < end; n++) {
		uint64_t t0 = xbd_mono_ms(), sector = 8 + (n % 64) * 8ull;
		int16_t w, r;

		pattern(tf_page(f, 0), sector, 8, n);
		w = io(f, 0, BLKIF_OP_WRITE, sector, 1, 0, false);
		memset(tf_page(f, 1), 0xee, XBD_PAGE_SIZE);
		r = w == BLKIF_RSP_OKAY ? io(f, 0, BLKIF_OP_READ, sector, 1, 1, false) : w;
		if (xbd_mono_ms() - t0 > worst)
			worst = xbd_mono_ms() - t0;
		if (w == BLKIF_RSP_OKAY && r == BLKIF_RSP_OKAY) {
			if (memcmp(tf_page(f, 0), tf_page(f, 1), XBD_PAGE_SIZE))
				tf_die("outage: read back differs at sector %" PRIu64, sector);
			ok++;
			ok_after += failed > 0;
		} else if (w == BLKIF_RSP_ERROR || r == BLKIF_RSP_ERROR) {
			failed++;
			ok_after = 0;
		} else {
			tf_die("outage: status %d/%d", w, r);
		}
		usleep(20000);
	}
	tf_say("outage: %u verified, %u failed, %u verified after the last failure, slowest %" PRIu64
	       " ms", ok, failed, ok_after, worst);
	if (!failed)
		tf_die("outage: no request failed: the storage never went away");
	if (!ok_after)
		tf_die("outage: nothing succeeded after the failures: no reconnect");
	if (worst > 5000)
		tf_die("outage: a request took %" PRIu64 " ms", worst);
}

static void sc_flush(struct tf *f)
{
	struct xbd_request r;

	memset(&r, 0, sizeof(r));
	write_read_verify(f, 0, 8, 4, false, 5);
	if (f->flush) {
		r.operation = BLKIF_OP_FLUSH_DISKCACHE;
		tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_OKAY, "flush");
		r.operation = BLKIF_OP_WRITE_BARRIER;
		tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_EOPNOTSUPP, "barrier not offered");
	} else if (f->barrier) {
		r.operation = BLKIF_OP_FLUSH_DISKCACHE;
		tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_EOPNOTSUPP, "flush not offered");
		r.operation = BLKIF_OP_WRITE_BARRIER;
		tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_OKAY, "empty barrier");
		pattern(tf_page(f, 0), 40, 8, 11);
		tf_expect(io(f, 0, BLKIF_OP_WRITE_BARRIER, 40, 1, 0, false), BLKIF_RSP_OKAY,
			  "barrier write");
		memset(tf_page(f, 1), 0, XBD_PAGE_SIZE);
		tf_expect(io(f, 0, BLKIF_OP_READ, 40, 1, 1, false), BLKIF_RSP_OKAY, "read");
		if (memcmp(tf_page(f, 0), tf_page(f, 1), XBD_PAGE_SIZE))
			tf_die("barrier write did not land");
		if (f->max_indirect)
			tf_die("barrier mode must not offer indirect descriptors");
	} else {
		tf_die("backend offers neither flush nor barrier");
	}
}

/*
 * Storage that discards only whole granules (RBD: 64 KiB): three granules
 * written, the middle one discarded, read back as zeros between
 * unchanged neighbours.
 */
static void discard_granule(struct tf *f)
{
	unsigned int gpages = f->discard_gran / XBD_PAGE_SIZE, n = 3 * gpages, done, per;
	uint64_t gsect = f->discard_gran / 512, base = 4 * gsect;
	struct xbd_request r;
	char *zero;

	if (f->discard_gran % XBD_PAGE_SIZE || n > 240)
		tf_die("discard-granularity %u: not a multiple of 4 KiB up to 320 KiB", f->discard_gran);
	write_read_verify(f, 0, base, n, false, 6);
	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_DISCARD;
	r.sector_number = base + gsect;
	r.nr_sectors = gsect;
	tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_OKAY, "discard of one granule");
	memset(tf_page(f, 600), 0xee, (size_t)n * XBD_PAGE_SIZE);
	for (done = 0; done < n; done += per) {
		per = n - done < 11 ? n - done : 11;
		tf_expect(io(f, 0, BLKIF_OP_READ, base + done * 8ull, per, 600 + done, false),
			  BLKIF_RSP_OKAY, "read");
	}
	zero = calloc(gpages, XBD_PAGE_SIZE);
	if (!zero)
		tf_die("out of memory");
	if (memcmp(tf_page(f, 600), tf_page(f, 0), (size_t)gpages * XBD_PAGE_SIZE) ||
	    memcmp(tf_page(f, 600 + gpages), zero, (size_t)gpages * XBD_PAGE_SIZE) ||
	    memcmp(tf_page(f, 600 + 2 * gpages), tf_page(f, 2 * gpages), (size_t)gpages * XBD_PAGE_SIZE))
		tf_die("the discarded granule does not read back as zeros (or its neighbours changed)");
	free(zero);
	tf_say("a discarded %u-byte granule reads back as zeros", f->discard_gran);
}

static void sc_discard(struct tf *f)
{
	struct xbd_request r;
	static char zero[XBD_PAGE_SIZE];

	if (!f->discard)
		tf_die("backend does not offer feature-discard");
	if (f->discard_gran > 8192) {
		discard_granule(f);
		return;
	}
	write_read_verify(f, 0, 512, 4, false, 6);
	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_DISCARD;
	r.sector_number = 520;
	r.nr_sectors = 16;
	tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_OKAY, "discard");
	memset(tf_page(f, 300), 0xee, 4 * XBD_PAGE_SIZE);
	tf_expect(io(f, 0, BLKIF_OP_READ, 512, 4, 300, false), BLKIF_RSP_OKAY, "read");
	if (memcmp(tf_page(f, 300), tf_page(f, 0), XBD_PAGE_SIZE) ||
	    memcmp(tf_page(f, 301), zero, XBD_PAGE_SIZE) || memcmp(tf_page(f, 302), zero, XBD_PAGE_SIZE) ||
	    memcmp(tf_page(f, 303), tf_page(f, 3), XBD_PAGE_SIZE))
		tf_die("discarded range does not read back as zeros (or its neighbours changed)");
	tf_say("discarded sectors read back as zeros");
}

static void sc_indirect(struct tf *f)
{
	if (f->max_indirect < 256)
		tf_die("backend offers only %u indirect segments", f->max_indirect);
	write_read_verify(f, 0, 2048, 256, true, 8); /* 1 MiB */
	write_read_verify(f, 0, 8, 13, true, 12);
}

static void sc_readonly(struct tf *f)
{
	if (!f->readonly)
		tf_die("backend info does not say read-only");
	tf_expect(io(f, 0, BLKIF_OP_WRITE, 8, 1, 0, false), BLKIF_RSP_ERROR, "write to read-only disk");
	tf_expect(io(f, 0, BLKIF_OP_READ, 8, 1, 0, false), BLKIF_RSP_OKAY, "read of read-only disk");
}

/* The device must still work after a refused request. */
static void still_works(struct tf *f)
{
	write_read_verify(f, 0, 16, 2, false, 99);
}

static void raw_rw(struct tf *f, uint8_t op, uint64_t sector, unsigned int nseg, uint8_t first,
		   uint8_t last, int16_t want, const char *what)
{
	struct blkif_request r;
	unsigned int i;

	memset(&r, 0, sizeof(r));
	r.operation = op;
	r.nr_segments = nseg;
	r.sector_number = sector;
	for (i = 0; i < nseg && i < BLKIF_MAX_SEGMENTS_PER_REQUEST; i++) {
		r.seg[i].gref = f->pool_refs[i];
		r.seg[i].first_sect = first;
		r.seg[i].last_sect = last;
	}
	tf_expect(raw_submit_wait(f, 0, &r, sizeof(r)), want, what);
}

/*
 * The hostile requests: each must be refused with the status given, and
 * the device must still work afterwards.
 */
static void sc_bad_op(struct tf *f)
{
	raw_rw(f, 99, 0, 1, 0, 7, BLKIF_RSP_ERROR, "unknown op 99");
	raw_rw(f, BLKIF_OP_RESERVED_1, 0, 1, 0, 7, BLKIF_RSP_ERROR, "reserved op 4");
	still_works(f);
}

static void sc_bad_burst(struct tf *f)
{
	unsigned int i;

	for (i = 0; i < 30; i++)
		raw_rw(f, 99, 0, 1, 0, 7, BLKIF_RSP_ERROR, "unknown op 99");
	still_works(f);
}

/*
 * Random requests, mostly invalid, some valid by chance: each must be
 * answered with OKAY, ERROR or EOPNOTSUPP.
 */
static void sc_garbage(struct tf *f)
{
	uint64_t seed = 0x9E3779B97F4A7C15ull;
	unsigned int i, k, okay = 0, err = 0, nots = 0;

	for (i = 0; i < 3000; i++) {
		union {
			struct blkif_request d;
			struct blkif_request_indirect r;
		} u;
		struct blkif_request_indirect *r = &u.r;
		struct blkif_request *d = &u.d;
		unsigned char *b = (unsigned char *)&u;
		int16_t st;

		for (k = 0; k < sizeof(u); k++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			b[k] = (unsigned char)seed;
		}
		r->operation = seed % 8;
		if (r->operation == BLKIF_OP_INDIRECT) {
			r->indirect_op = (seed >> 8) % 4;
			r->nr_segments = (seed >> 16) % 300;
			r->indirect_grefs[0] = f->pool_refs[(seed >> 24) % POOL_PAGES];
			if (seed & (1ull << 40))
				r->sector_number = (seed >> 41) % f->sectors;
		} else {
			d->nr_segments = (seed >> 16) % 14;
			if (seed & (1ull << 40))
				d->sector_number = (seed >> 41) % (f->sectors + 16);
			for (k = 0; k < BLKIF_MAX_SEGMENTS_PER_REQUEST; k++) {
				if ((seed >> (k + 20)) & 1)
					d->seg[k].gref = f->pool_refs[(seed >> k) % 1000];
				d->seg[k].first_sect = (seed >> (2 * k)) % 9;
				d->seg[k].last_sect = d->seg[k].first_sect + (seed >> (3 * k)) % 3;
			}
		}
		st = raw_submit_wait(f, 0, &u, sizeof(u));
		if (st == BLKIF_RSP_OKAY)
			okay++;
		else if (st == BLKIF_RSP_ERROR)
			err++;
		else if (st == BLKIF_RSP_EOPNOTSUPP)
			nots++;
		else
			tf_die("request %u answered with status %d", i, st);
	}
	tf_say("garbage: %u okay, %u error, %u not supported", okay, err, nots);
	still_works(f);
}

static void sc_nseg0(struct tf *f)
{
	raw_rw(f, BLKIF_OP_READ, 0, 0, 0, 7, BLKIF_RSP_ERROR, "read with 0 segments");
	still_works(f);
}

static void sc_nseg12(struct tf *f)
{
	raw_rw(f, BLKIF_OP_READ, 0, 12, 0, 7, BLKIF_RSP_ERROR, "read with 12 segments");
	still_works(f);
}

static void sc_first_gt_last(struct tf *f)
{
	raw_rw(f, BLKIF_OP_READ, 0, 1, 5, 2, BLKIF_RSP_ERROR, "first_sect > last_sect");
	still_works(f);
}

static void sc_last8(struct tf *f)
{
	raw_rw(f, BLKIF_OP_READ, 0, 1, 0, 8, BLKIF_RSP_ERROR, "last_sect 8");
	still_works(f);
}

static void sc_beyond_end(struct tf *f)
{
	raw_rw(f, BLKIF_OP_READ, f->sectors - 4, 1, 0, 7, BLKIF_RSP_ERROR, "read past the end");
	raw_rw(f, BLKIF_OP_WRITE, f->sectors, 1, 0, 0, BLKIF_RSP_ERROR, "write at the end");
	still_works(f);
}

static void sc_overflow(struct tf *f)
{
	raw_rw(f, BLKIF_OP_READ, UINT64_MAX - 3, 1, 0, 7, BLKIF_RSP_ERROR,
	       "sector range that overflows");
	still_works(f);
}

static void sc_indirect_too_many(struct tf *f)
{
	struct blkif_request_indirect r;
	struct blkif_request_segment *seg = (void *)tf_page(f, POOL_PAGES - 1);
	unsigned int i;

	for (i = 0; i < 512; i++)
		seg[i] = (struct blkif_request_segment){ f->pool_refs[i % 256], 0, 7 };
	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_INDIRECT;
	r.indirect_op = BLKIF_OP_READ;
	r.nr_segments = f->max_indirect + 1;
	r.sector_number = 0;
	r.indirect_grefs[0] = f->pool_refs[POOL_PAGES - 1];
	r.indirect_grefs[1] = f->pool_refs[POOL_PAGES - 2];
	tf_expect(raw_submit_wait(f, 0, &r, sizeof(r)), BLKIF_RSP_ERROR,
		  "indirect with more segments than offered");
	r.nr_segments = 4;
	r.indirect_op = BLKIF_OP_DISCARD;
	tf_expect(raw_submit_wait(f, 0, &r, sizeof(r)), BLKIF_RSP_ERROR, "indirect wrapping a discard");
	still_works(f);
}

/*
 * A read whose second segment names grant ref, which the backend must not
 * be able to use; pg (if any) is the page behind it, which must be free
 * again once the request is refused.
 */
static void gref_refused(struct tf *f, uint32_t ref, void *pg, const char *what)
{
	struct blkif_request r;

	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_READ;
	r.nr_segments = 2;
	r.sector_number = 0;
	r.seg[0] = (struct blkif_request_segment){ f->pool_refs[0], 0, 7 };
	r.seg[1] = (struct blkif_request_segment){ ref, 0, 7 };
	tf_expect(raw_submit_wait(f, 0, &r, sizeof(r)), BLKIF_RSP_ERROR, what);
	if (pg && xbd_gnt_unshare(f->p, pg, 1))
		tf_die("the backend still maps the page of a refused request");
	still_works(f);
}

static void sc_gref_bad(struct tf *f)
{
	/* never granted */
	gref_refused(f, f->pool_refs[POOL_PAGES - 1] + 5000, NULL, "gref-bad");
}

static void sc_gref_other(struct tf *f)
{
	uint32_t ref = 0;
	void *pg = xbd_gnt_share(f->p, f->bdom + 100, 1, true, &ref);

	if (!pg)
		tf_die("cannot grant to domain %u: %s", f->bdom + 100, strerror(errno));
	gref_refused(f, ref, pg, "gref-other");
}

static void sc_gref_ro(struct tf *f)
{
	uint32_t ref = 0;
	void *pg = xbd_gnt_share(f->p, f->bdom, 1, false, &ref);

	if (!pg)
		tf_die("cannot grant read-only: %s", strerror(errno));
	gref_refused(f, ref, pg, "gref-ro");
}

/* req_prod far past the ring: the backend must disconnect this device. */
static void sc_ring_overflow(struct tf *f)
{
	struct blkif_sring *s = f->q[0].sring;
	int st;

	still_works(f);
	__atomic_store_n(&s->req_prod, s->rsp_prod + f->q[0].ring.nr_ents + 5, __ATOMIC_SEQ_CST);
	xbd_evtchn_notify(f->ev, f->q[0].port);
	st = tf_wait_backend(f, 1u << XenbusStateClosing | 1u << XenbusStateClosed, TF_TIMEOUT_MS);
	if (st < 0)
		tf_die("backend did not close after a corrupt ring: %s", strerror(-st));
	tf_say("backend went to %s after req_prod ran past the ring", xbd_xenbus_state_name(st));
	tf_write_uint(f, XBT_NULL, f->fdir, "state", XenbusStateClosed);
}

/* Notifications with no request behind them. */
static void sc_flood(struct tf *f)
{
	uint64_t end = xbd_mono_ms() + (uint64_t)(secs * 1000), n = 0;

	still_works(f);
	while (xbd_mono_ms() < end) {
		unsigned int i;

		for (i = 0; i < 1000; i++)
			xbd_evtchn_notify(f->ev, f->q[0].port);
		n += 1000;
	}
	tf_say("sent %" PRIu64 " notifications", n);
	still_works(f);
}

/* Requests whose responses are never consumed: the backend must answer them all. */
static void sc_noconsume(struct tf *f)
{
	struct xring *r = &f->q[0].ring;
	struct blkif_sring *s = f->q[0].sring;
	unsigned int i, n = r->nr_ents;
	uint64_t end;

	for (i = 0; i < n; i++) {
		struct xbd_request q;

		memset(&q, 0, sizeof(q));
		q.id = i;
		q.operation = BLKIF_OP_READ;
		q.sector_number = i * 8;
		q.nr_segments = 1;
		q.seg[0] = (struct xbd_seg){ f->pool_refs[i % 256], 0, 7 };
		if (xring_front_put_request(r, &q))
			tf_die("ring full after %u requests", i);
	}
	tf_kick(f, 0);
	end = xbd_mono_ms() + TF_TIMEOUT_MS;
	while (__atomic_load_n(&s->rsp_prod, __ATOMIC_ACQUIRE) != r->req_prod_pvt) {
		if (xbd_mono_ms() > end)
			tf_die("backend answered %u of %u requests", s->rsp_prod - r->rsp_cons, n);
		usleep(1000);
	}
	tf_say("backend answered all %u requests of a full ring that nobody consumes", n);
	/* One more notification: nothing new, the backend must not answer twice. */
	xbd_evtchn_notify(f->ev, f->q[0].port);
	usleep(100000);
	if (s->rsp_prod != r->req_prod_pvt)
		tf_die("backend produced responses without requests");
}

/* A frontend that closes and reconnects with fresh rings. */
static void sc_reconnect(struct tf *f)
{
	still_works(f);
	tf_close(f);
	for (unsigned int i = 0; i < f->nq; i++) {
		if (xbd_gnt_unshare(f->p, f->q[i].sring, f->q[i].npages))
			tf_die("backend still maps the old ring after Closed");
		f->q[i].sring = NULL;
		xbd_evtchn_unbind(f->ev, f->q[i].port);
	}
	tf_write_uint(f, XBT_NULL, f->fdir, "state", XenbusStateInitialising);
	tf_say("reconnecting");
	tf_connect(f);
	still_works(f);
}

/*
 * More distinct grants than the backend's persistent grant cache holds
 * (1056 per ring): data must stay intact while the LRU evicts.
 */
static void sc_lru(struct tf *f)
{
	const unsigned int n = 1100, per = 11;
	char *copy = malloc((size_t)n * XBD_PAGE_SIZE);
	unsigned int i, round;

	if (!copy)
		tf_die("out of memory");
	for (round = 0; round < 2; round++) {
		pattern(tf_page(f, 0), 4096, n * 8, 20 + round);
		memcpy(copy, tf_page(f, 0), (size_t)n * XBD_PAGE_SIZE);
		for (i = 0; i < n; i += per)
			if (io(f, 0, BLKIF_OP_WRITE, 4096 + i * 8ull, per, i, false) != BLKIF_RSP_OKAY)
				tf_die("write %u failed", i);
		memset(tf_page(f, 0), 0, (size_t)n * XBD_PAGE_SIZE);
		for (i = 0; i < n; i += per)
			if (io(f, 0, BLKIF_OP_READ, 4096 + i * 8ull, per, i, false) != BLKIF_RSP_OKAY)
				tf_die("read %u failed", i);
		if (memcmp(copy, tf_page(f, 0), (size_t)n * XBD_PAGE_SIZE))
			tf_die("data differs after cycling %u grants (round %u)", n, round);
	}
	free(copy);
	tf_say("%u distinct grants cycled twice, data intact", n);
}

/* Say "paused" and wait until the file go exists (the test restarts the backend meanwhile). */
static void pause_until(const char *go)
{
	uint64_t end = xbd_mono_ms() + 4 * TF_TIMEOUT_MS;

	tf_say("paused");
	while (access(go, F_OK)) {
		if (xbd_mono_ms() > end)
			tf_die("%s never appeared", go);
		usleep(20000);
	}
}

/* Work, wait until the file $RAWFRONT_GO exists, work again. */
static void sc_pause(struct tf *f)
{
	const char *go = getenv("RAWFRONT_GO");

	if (!go)
		tf_die("pause needs RAWFRONT_GO");
	still_works(f);
	pause_until(go);
	still_works(f);
}

/*
 * Across a backend that is killed and restarted (the crash tests): 40
 * rounds of --qd (default 24, at most 299) one-page writes of distinct
 * patterns, then a barrier or a flush if offered, all pushed at once;
 * every response is awaited for up to 60 s, each id must be answered
 * exactly once and OKAY; then every page written is read back and
 * compared.
 */
#define SURVIVE_MAX 300

static void sc_survive(struct tf *f)
{
	struct xring *ring = &f->q[0].ring;
	unsigned int n = qd > 1 ? qd : 24, round, i, got;

	if (n > ring->nr_ents - 1)
		n = ring->nr_ents - 1;
	/* Pages 0..n hold the writes and a barrier's, page SURVIVE_MAX the read-back. */
	if (n > SURVIVE_MAX - 1)
		n = SURVIVE_MAX - 1;
	for (round = 0; round < 40; round++) {
		uint64_t base = f->next_id, end = xbd_mono_ms() + 60000;
		unsigned int total = n + (f->barrier || f->flush);
		bool seen[SURVIVE_MAX + 1] = { false };
		struct xbd_request r;

		for (i = 0; i < total; i++) {
			uint64_t sector = ((uint64_t)(round % 8) * (n + 1) + i) * 8;

			memset(&r, 0, sizeof(r));
			r.id = f->next_id++;
			if (i < n || f->barrier) {
				/* A barrier carries data: it must land after the writes before it. */
				r.operation = i < n ? BLKIF_OP_WRITE : BLKIF_OP_WRITE_BARRIER;
				r.sector_number = sector;
				r.nr_segments = 1;
				r.seg[0] = (struct xbd_seg){ f->pool_refs[i], 0, 7 };
				pattern(tf_page(f, i), sector, 8, round + 1);
			} else {
				r.operation = BLKIF_OP_FLUSH_DISKCACHE;
			}
			if (xring_front_put_request(ring, &r))
				tf_die("put_request failed");
		}
		tf_kick(f, 0);
		for (got = 0; got < total;) {
			struct xbd_response rsp[64];
			int k, m = xring_front_consume(ring, rsp, 64);

			if (m < 0)
				tf_die("response ring corrupt: %s", strerror(-m));
			for (k = 0; k < m; k++) {
				uint64_t idx = rsp[k].id - base;

				if (rsp[k].id < base || idx >= total || seen[idx])
					tf_die("round %u: request %" PRIu64 " answered twice (or never asked)",
					       round, rsp[k].id);
				seen[idx] = true;
				got++;
				if (rsp[k].status != BLKIF_RSP_OKAY)
					tf_die("round %u: request %" PRIu64 " failed with status %d", round,
					       rsp[k].id, rsp[k].status);
			}
			if (m || xring_front_final_check(ring))
				continue;
			if (xbd_mono_ms() > end)
				tf_die("round %u: %u of %u requests unanswered after 60 s", round,
				       total - got, total);
			tf_wait_event(f, 100);
		}
		for (i = 0; i < n + (f->barrier ? 1 : 0); i++) {
			uint64_t sector = ((uint64_t)(round % 8) * (n + 1) + i) * 8;

			memset(tf_page(f, SURVIVE_MAX), 0xee, XBD_PAGE_SIZE);
			if (io(f, 0, BLKIF_OP_READ, sector, 1, SURVIVE_MAX, false) != BLKIF_RSP_OKAY)
				tf_die("round %u: read back of sector %" PRIu64 " failed", round, sector);
			if (memcmp(tf_page(f, SURVIVE_MAX), tf_page(f, i), XBD_PAGE_SIZE))
				tf_die("round %u: sector %" PRIu64 " reads back other data than written",
				       round, sector);
		}
	}
	tf_say("survive: 40 rounds of %u writes%s, each answered once, all read back", n,
	       f->barrier ? " and a barrier" : f->flush ? " and a flush" : "");
}

/*
 * An exact amount of I/O for counter tests: 3 writes of 4 pages, 2 reads
 * of 2 pages, a flush, a discard of 8 sectors (each if offered) and one
 * request with a bad op; with RAWFRONT_GO it then pauses like "pause".
 */
static void sc_counted(struct tf *f)
{
	const char *go = getenv("RAWFRONT_GO");
	struct xbd_request r;
	unsigned int i;

	for (i = 0; i < 3; i++) {
		pattern(tf_page(f, 0), i * 32, 32, i);
		tf_expect(io(f, 0, BLKIF_OP_WRITE, i * 32, 4, 0, false), BLKIF_RSP_OKAY, "write");
	}
	for (i = 0; i < 2; i++)
		tf_expect(io(f, 0, BLKIF_OP_READ, i * 16, 2, 10, false), BLKIF_RSP_OKAY, "read");
	memset(&r, 0, sizeof(r));
	if (f->flush) {
		r.operation = BLKIF_OP_FLUSH_DISKCACHE;
		tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_OKAY, "flush");
	}
	if (f->discard) {
		r.operation = BLKIF_OP_DISCARD;
		r.sector_number = 512;
		r.nr_sectors = 8;
		tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_OKAY, "discard");
	}
	raw_rw(f, 99, 0, 1, 0, 7, BLKIF_RSP_ERROR, "unknown op 99");
	tf_say("counted: writes 3 (96 sectors), reads 2 (32 sectors), flushes %d, discards %d, "
	       "bad ops 1", f->flush, f->discard);
	if (go)
		pause_until(go);
}

/* The null engine: writes vanish, reads return zeros. */
static void sc_zeros(struct tf *f)
{
	static char zero[11 * XBD_PAGE_SIZE];

	pattern(tf_page(f, 0), 8, 88, 3);
	tf_expect(io(f, 0, BLKIF_OP_WRITE, 8, 11, 0, false), BLKIF_RSP_OKAY, "write");
	memset(tf_page(f, 20), 0xee, sizeof(zero));
	tf_expect(io(f, 0, BLKIF_OP_READ, 8, 11, 20, false), BLKIF_RSP_OKAY, "read");
	if (memcmp(tf_page(f, 20), zero, sizeof(zero)))
		tf_die("reads did not return zeros");
	tf_say("reads return zeros");
}

/*
 * Random reads, writes, discards and flushes at queue depth qd over all
 * queues for secs seconds, every read checked against a shadow copy.
 * Each request slot owns a region of the disk, so requests in flight
 * never overlap and the expected contents are always known.  The disk
 * must be freshly created (reads as zeros).
 */
#define STRESS_PAGES 32
struct stress_slot {
	bool busy;
	uint8_t op;
	unsigned int qi;
	uint64_t block, nblocks;
};

static void sc_stress(struct tf *f)
{
	uint64_t nblk = f->sectors / 8, region, seed = 0x2545F4914F6CDD1Dull, ops = 0, end, deadline, answered;
	struct stress_slot slot[32];
	unsigned char *shadow;
	unsigned int i, busy = 0, maxseg = f->max_indirect >= STRESS_PAGES ? STRESS_PAGES : 11;
	struct xbd_response rsp[64];

	if (qd > 32)
		qd = 32;
	if (nblk > 4096)
		nblk = 4096;
	region = nblk / qd;
	if (region < STRESS_PAGES)
		tf_die("disk too small for stress at qd %u", qd);
	shadow = calloc(nblk, XBD_PAGE_SIZE);
	if (!shadow)
		tf_die("out of memory");
	/* The disk must be fresh (all zeros), as the shadow starts. */
	memset(slot, 0, sizeof(slot));
	end = xbd_mono_ms() + (uint64_t)(secs * 1000);
	/*
	 * A backend (or domain) that goes away must not leave us waiting
	 * forever: fail when nothing was answered for TF_TIMEOUT_MS, and in any
	 * case TF_TIMEOUT_MS after the end of the run.
	 */
	deadline = end + TF_TIMEOUT_MS;
	answered = xbd_mono_ms();
	for (;;) {
		bool more = xbd_mono_ms() < end;
		unsigned int qi;

		for (i = 0; more && i < qd; i++) {
			struct stress_slot *sl = &slot[i];
			struct xbd_request r;
			unsigned int k, pg0 = i * STRESS_PAGES, roll;

			if (sl->busy)
				continue;
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			roll = seed % 100;
			sl->qi = i % f->nq;
			if (xring_front_free(&f->q[sl->qi].ring) == 0)
				continue;
			sl->nblocks = 1 + (seed >> 8) % maxseg;
			sl->block = i * region + (seed >> 20) % (region - sl->nblocks + 1);
			memset(&r, 0, sizeof(r));
			r.id = i;
			r.sector_number = sl->block * 8;
			if (roll < 3 && (f->flush || f->barrier)) {
				sl->op = r.operation = f->flush ? BLKIF_OP_FLUSH_DISKCACHE
							       : BLKIF_OP_WRITE_BARRIER;
				sl->nblocks = 0;
				r.sector_number = 0;
			} else if (roll < 8 && f->discard) {
				sl->op = r.operation = BLKIF_OP_DISCARD;
				r.nr_sectors = sl->nblocks * 8;
				memset(shadow + sl->block * XBD_PAGE_SIZE, 0, sl->nblocks * XBD_PAGE_SIZE);
			} else {
				sl->op = r.operation = roll < 54 ? BLKIF_OP_WRITE : BLKIF_OP_READ;
				r.nr_segments = sl->nblocks;
				if (sl->op == BLKIF_OP_WRITE) {
					pattern(tf_page(f, pg0), sl->block * 8, sl->nblocks * 8, (unsigned int)seed);
					memcpy(shadow + sl->block * XBD_PAGE_SIZE, tf_page(f, pg0),
					       sl->nblocks * XBD_PAGE_SIZE);
				} else {
					memset(tf_page(f, pg0), 0xee, sl->nblocks * XBD_PAGE_SIZE);
				}
				if (sl->nblocks > 11) {
					struct blkif_request_segment *seg = (void *)tf_page(f, 1100 + i);

					for (k = 0; k < sl->nblocks; k++)
						seg[k] = (struct blkif_request_segment){
							f->pool_refs[pg0 + k], 0, 7 };
					r.indirect = true;
					r.indirect_grefs[0] = f->pool_refs[1100 + i];
				} else {
					for (k = 0; k < sl->nblocks; k++)
						r.seg[k] = (struct xbd_seg){ f->pool_refs[pg0 + k], 0, 7 };
				}
			}
			if (xring_front_put_request(&f->q[sl->qi].ring, &r))
				tf_die("put_request failed");
			sl->busy = true;
			busy++;
		}
		for (qi = 0; qi < f->nq; qi++)
			tf_kick(f, qi);
		if (!more && !busy)
			break;
		for (;;) {
			unsigned int got = 0;

			for (qi = 0; qi < f->nq; qi++) {
				int n = xring_front_consume(&f->q[qi].ring, rsp, 64), j;

				if (n < 0)
					tf_die("response ring corrupt");
				for (j = 0; j < n; j++) {
					struct stress_slot *sl;

					if (rsp[j].id >= qd || !slot[rsp[j].id].busy)
						tf_die("response for an unknown id %" PRIu64, rsp[j].id);
					sl = &slot[rsp[j].id];
					if (rsp[j].status != BLKIF_RSP_OKAY)
						tf_die("op %u at block %" PRIu64 " failed: %d", sl->op,
						       sl->block, rsp[j].status);
					if (sl->op == BLKIF_OP_READ &&
					    memcmp(tf_page(f, rsp[j].id * STRESS_PAGES),
						   shadow + sl->block * XBD_PAGE_SIZE,
						   sl->nblocks * XBD_PAGE_SIZE))
						tf_die("read of %" PRIu64 " blocks at block %" PRIu64
						       " differs from what was written", sl->nblocks,
						       sl->block);
					sl->busy = false;
					busy--;
					ops++;
				}
				got += n;
			}
			if (got) {
				answered = xbd_mono_ms();
				break;
			}
			for (qi = 0; qi < f->nq; qi++)
				if (xring_front_final_check(&f->q[qi].ring))
					got++;
			if (got)
				continue;
			if (busy && xbd_mono_ms() > answered + TF_TIMEOUT_MS)
				tf_die("stress: %u request(s) in flight and none answered for %d ms",
				       busy, TF_TIMEOUT_MS);
			if (xbd_mono_ms() > deadline)
				tf_die("stress: %u request(s) unanswered %d ms after the end of the run",
				       busy, TF_TIMEOUT_MS);
			tf_wait_event(f, 100);
		}
	}
	free(shadow);
	tf_say("stress: %" PRIu64 " requests at qd %u on %u queue(s), all verified", ops, qd, f->nq);
}

/* Random 4 KiB reads at queue depth qd for secs seconds. */
static void sc_bench(struct tf *f)
{
	struct xring *r = &f->q[0].ring;
	uint64_t start = xbd_mono_ms(), end = start + (uint64_t)(secs * 1000), done = 0, seed = 88172645463325252ull;
	unsigned int inflight = 0, i;
	struct xbd_response rsp[64];
	uint64_t pages = f->sectors / 8;

	if (qd > r->nr_ents)
		qd = r->nr_ents;
	for (;;) {
		bool more = xbd_mono_ms() < end;

		while (more && inflight < qd) {
			struct xbd_request q;

			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			memset(&q, 0, sizeof(q));
			q.id = inflight;
			q.operation = BLKIF_OP_READ;
			q.sector_number = (seed % pages) * 8;
			q.nr_segments = 1;
			q.seg[0] = (struct xbd_seg){ f->pool_refs[inflight % 256], 0, 7 };
			if (xring_front_put_request(r, &q))
				break;
			inflight++;
		}
		tf_kick(f, 0);
		if (!more && !inflight)
			break;
		for (;;) {
			int n = xring_front_consume(r, rsp, 64);

			if (n < 0)
				tf_die("response ring corrupt");
			for (i = 0; i < (unsigned int)n; i++)
				if (rsp[i].status != BLKIF_RSP_OKAY)
					tf_die("bench read failed: %d", rsp[i].status);
			inflight -= n;
			done += n;
			if (n)
				break;
			if (xring_front_final_check(r))
				continue;
			tf_wait_event(f, 100);
		}
	}
	end = xbd_mono_ms();
	printf("bench: qd=%u reqs=%" PRIu64 " secs=%.2f iops=%.0f notify_sent/req=%.3f notify_recv/req=%.3f\n",
	       qd, done, (end - start) / 1000.0, done * 1000.0 / (end - start ? end - start : 1),
	       done ? (double)f->notify_sent / done : 0, done ? (double)f->notify_recv / done : 0);
}

/* "connect" leaves the device connected for the test to inspect. */
static void sc_connect(struct tf *f)
{
	(void)f;
}

static const struct tf_scenario scenarios[] = {
	{ "connect", sc_connect, "connect and leave the device Connected", true },
	{ "rw", sc_rw, "verified writes and reads on every queue, sub-page segments, the last sectors",
	  false },
	{ "outage", sc_outage,
	  "for --secs a page written and read back every 20 ms while the storage goes away and "
	  "comes back: some fail, none takes over 5 s, those after the last failure verify",
	  false },
	{ "flush", sc_flush, "a flush or a barrier (whichever is offered), the other refused", false },
	{ "discard", sc_discard, "discarded sectors read back as zeros, their neighbours intact", false },
	{ "indirect", sc_indirect, "verified 1 MiB and 13-segment indirect requests (needs 256)", false },
	{ "readonly", sc_readonly, "info says read-only; a write is refused, a read works", false },
	{ "bad-op", sc_bad_op, "unknown and reserved operations: ERROR", false },
	{ "bad-burst", sc_bad_burst, "30 unknown operations in a row: ERROR each", false },
	{ "garbage", sc_garbage, "3000 random requests: each OKAY, ERROR or EOPNOTSUPP", false },
	{ "nseg0", sc_nseg0, "a read with 0 segments: ERROR", false },
	{ "nseg12", sc_nseg12, "a read with 12 direct segments: ERROR", false },
	{ "first-gt-last", sc_first_gt_last, "a segment with first_sect > last_sect: ERROR", false },
	{ "last8", sc_last8, "a segment with last_sect 8: ERROR", false },
	{ "beyond-end", sc_beyond_end, "a read past the end and a write at the end: ERROR", false },
	{ "overflow", sc_overflow, "a sector range that overflows: ERROR", false },
	{ "indirect-too-many", sc_indirect_too_many,
	  "more indirect segments than offered, an indirect discard: ERROR", false },
	{ "gref-bad", sc_gref_bad, "a segment naming a grant never made: ERROR", false },
	{ "gref-other", sc_gref_other, "a grant made to another domain: ERROR, the page free", false },
	{ "gref-ro", sc_gref_ro, "a read into a read-only grant: ERROR, the page free", false },
	{ "ring-overflow", sc_ring_overflow, "req_prod far past the ring: the backend closes, we leave",
	  true },
	{ "flood", sc_flood, "notifications with no request behind them for --secs", false },
	{ "noconsume", sc_noconsume, "a full ring whose responses nobody consumes: all answered",
	  false },
	{ "reconnect", sc_reconnect, "close, then connect again with fresh rings", false },
	{ "stress", sc_stress, "verified random I/O at --qd on every queue for --secs (fresh disk)",
	  false },
	{ "lru", sc_lru, "1100 distinct grants cycled twice: data intact", false },
	{ "pause", sc_pause, "work, wait for the file $RAWFRONT_GO, work again", false },
	{ "counted", sc_counted, "an exact amount of I/O for counter tests (then as pause)", false },
	{ "survive", sc_survive,
	  "40 rounds of --qd (24) writes and a flush or barrier across a backend killed and "
	  "restarted: each answered once, OKAY, all read back; leaves the device Connected", true },
	{ "zeros", sc_zeros, "the null engine: reads return zeros", false },
	{ "bench", sc_bench, "random 4 KiB reads at --qd for --secs, IOPS printed", false },
	{ NULL },
};

static const struct tf_program program = {
	.name = "rawfront",
	.scenarios = scenarios,
	.options =
		"  --dev DEVID           the vbd (51728, xvdb)\n"
		"  --order N             ring-page-order N (2^N ring pages)\n"
		"  --num-ring-pages N    N ring pages, with the old num-ring-pages key\n"
		"  --order-per-queue     the page count in queue-N/, not the top directory\n"
		"  --queues N            1..4 queues\n"
		"  --abi ABI             native, x86_32-abi or x86_64-abi\n"
		"  --persistent 0|1      feature-persistent (1)\n"
		"  --state 3|4           the state written with the ring keys (3)\n"
		"  --secs S              how long flood, stress and bench run (1)\n"
		"  --qd N                requests in flight for stress and bench (1)\n",
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "order", required_argument, NULL, 'o' },
		{ "num-ring-pages", required_argument, NULL, 'n' },
		{ "queues", required_argument, NULL, 'q' },
		{ "abi", required_argument, NULL, 'a' },
		{ "persistent", required_argument, NULL, 'p' },
		{ "secs", required_argument, NULL, 's' },
		{ "qd", required_argument, NULL, 'Q' },
		{ "state", required_argument, NULL, 'S' },
		{ "order-per-queue", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct tf f;
	int c;

	tf_init(&f, &program, POOL_PAGES);
	f.persistent = true;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': f.devid = strtoul(optarg, NULL, 0); break;
		case 'o': f.order = strtoul(optarg, NULL, 0); break;
		case 'n': f.num_ring_pages = strtoul(optarg, NULL, 0); break;
		case 'q': f.nq = strtoul(optarg, NULL, 0); break;
		case 'p': f.persistent = atoi(optarg); break;
		case 's': secs = atof(optarg); break;
		case 'Q': qd = strtoul(optarg, NULL, 0); break;
		case 'S': f.connect_state = strtoul(optarg, NULL, 0); break;
		case 'P': f.order_per_queue = true; break;
		case 'a':
			if (!strcmp(optarg, "native"))
				f.abi = XBD_ABI_NATIVE;
			else if (xbd_abi_from_protocol(optarg, &f.abi))
				tf_die("unknown abi %s", optarg);
			break;
		case 'h': tf_usage(&program, 0);
		default: tf_usage(&program, 1);
		}
	}
	return tf_main(&f, argc, argv);
}
