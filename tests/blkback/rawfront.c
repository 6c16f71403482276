/*
 * rawfront.c: a test frontend that acts as a domU (XBD_SIM_DOMID) and talks
 * blkif to a vbd backend through ring.h, platform.h and xenbus.h directly,
 * so that it can break every rule on purpose.  It connects (grants the ring
 * pages, allocates event channels, writes ring-ref/event-channel/protocol
 * and state=3, waits for the backend's state 4) and runs one scenario; the
 * exit status says whether the backend behaved (0) or not (1).
 *
 *   rawfront [--dev DEVID] [--order N] [--num-ring-pages N] [--queues N]
 *            [--abi native|x86_32|x86_64] [--persistent 0|1] [--secs S]
 *            [--qd N] [--state 3|4] [--order-per-queue] SCENARIO
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"
#include "ring/ring.h"
#include "xenstore/xenbus.h"

#define MAXQ 4
#define POOL_PAGES 1200
#define TIMEOUT_MS 10000

struct queue {
	void *sring;
	unsigned int npages;       /* pages shared at sring */
	uint32_t refs[XBD_RING_MAX_PAGES];
	struct xbd_ring ring;
	int port;
};

struct fe {
	struct xbd_platform *p;
	struct xbd_xs *xs;
	struct xbd_evtchn *ev;
	uint32_t me, bdom, devid;
	char fdir[XBD_XS_PATH_MAX], bdir[XBD_XS_PATH_MAX];
	unsigned int order, num_ring_pages, nq;
	enum xbd_abi abi;
	bool persistent;
	struct queue q[MAXQ];
	/* data pages granted read-write to the backend */
	char *pool;
	uint32_t pool_refs[POOL_PAGES];
	uint64_t sectors;
	unsigned int sector_size, max_indirect;
	bool flush, barrier, discard, readonly;
	unsigned int discard_gran;
	uint64_t next_id;
	uint64_t notify_sent, notify_recv;
};

static double secs = 1.0;
static unsigned int connect_state = XenbusStateInitialised; /* --state: 4 skips Initialised */
static bool order_per_queue; /* --order-per-queue: ring-page-order in queue-N/ */
static unsigned int qd = 1;

#define die(...) do { fprintf(stderr, "rawfront: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define say(...) do { printf("rawfront: " __VA_ARGS__); putchar('\n'); fflush(stdout); } while (0)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rd_uint(struct fe *f, const char *dir, const char *k, uint64_t dflt)
{
	char p[XBD_XS_PATH_MAX];
	uint64_t v;

	xbd_xs_pathf(p, sizeof(p), "%s/%s", dir, k);
	if (xbd_xs_read_uint(f->xs, XBT_NULL, p, 0, UINT64_MAX, &v))
		return dflt;
	return v;
}

static void wr(struct fe *f, xs_transaction_t t, const char *dir, const char *k, uint64_t v)
{
	char p[XBD_XS_PATH_MAX];
	int err;

	xbd_xs_pathf(p, sizeof(p), "%s/%s", dir, k);
	err = xbd_xs_write_uint(f->xs, t, p, v);
	if (err)
		die("cannot write %s: %s", p, strerror(-err));
}

static int wait_backend(struct fe *f, unsigned int mask, int ms)
{
	enum xenbus_state st;
	int err = xbd_xenbus_wait_state(f->xs, f->bdir, mask, ms, &st);

	return err ? err : (int)st;
}

/* ---- ring setup ---- */

static void setup_queue(struct fe *f, unsigned int i)
{
	struct queue *q = &f->q[i];
	unsigned int npages = 1u << f->order;
	int err;

	if (f->num_ring_pages)
		npages = f->num_ring_pages;
	q->sring = xbd_gnt_share(f->p, f->bdom, npages, true, q->refs);
	if (!q->sring)
		die("cannot share %u ring pages: %s", npages, strerror(errno));
	q->npages = npages;
	xbd_ring_init_shared(q->sring, npages);
	err = xbd_ring_attach(&q->ring, q->sring, npages, f->abi, XBD_RING_FRONT);
	if (err)
		die("ring attach: %s", strerror(-err));
	q->port = xbd_evtchn_alloc_unbound(f->ev, f->bdom);
	if (q->port < 0)
		die("alloc_unbound: %s", strerror(-q->port));
}

/* Whether key is one of the ring keys a frontend (of any kind) writes. */
static bool ring_key(const char *key)
{
	static const char *const keys[] = {
		"ring-page-order", "num-ring-pages", "event-channel", "multi-queue-num-queues",
	};

	if (!strncmp(key, "queue-", 6) || !strncmp(key, "ring-ref", 8))
		return true;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(key, keys[i]))
			return true;
	return false;
}

/*
 * Remove the ring keys an earlier frontend of this vbd (another rawfront,
 * or xbd-front with more queues or pages) left: the backend reads them
 * with ours and would see a layout we never wrote.
 */
static int clear_ring_keys(struct fe *f, xs_transaction_t t)
{
	char **names = NULL, p[XBD_XS_PATH_MAX];
	unsigned int n = 0, i;
	int err;

	err = xbd_xs_directory(f->xs, t, f->fdir, &names, &n);
	if (err)
		return err == -ENOENT ? 0 : err;
	for (i = 0; i < n && !err; i++) {
		if (!ring_key(names[i]))
			continue;
		xbd_xs_pathf(p, sizeof(p), "%s/%s", f->fdir, names[i]);
		err = xbd_xs_rm(f->xs, t, p);
	}
	free(names);
	return err;
}

static int write_keys(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	struct fe *f = arg;
	unsigned int i, j;
	int err;

	err = clear_ring_keys(f, t);
	if (err)
		return err;

	for (i = 0; i < f->nq; i++) {
		struct queue *q = &f->q[i];
		char dir[XBD_XS_PATH_MAX], k[32];
		unsigned int npages = f->num_ring_pages ? f->num_ring_pages : 1u << f->order;

		if (f->nq > 1)
			xbd_xs_pathf(dir, sizeof(dir), "%s/queue-%u", f->fdir, i);
		else
			snprintf(dir, sizeof(dir), "%s", f->fdir);
		/* Linux blkfront writes the page count once, in the top directory. */
		if (f->num_ring_pages) {
			wr(f, t, order_per_queue ? dir : f->fdir, "num-ring-pages", npages);
		} else if (f->order) {
			wr(f, t, order_per_queue ? dir : f->fdir, "ring-page-order", f->order);
		}
		if (!f->order && !f->num_ring_pages) {
			wr(f, t, dir, "ring-ref", q->refs[0]);
		} else {
			for (j = 0; j < npages; j++) {
				snprintf(k, sizeof(k), "ring-ref%u", j);
				wr(f, t, dir, k, q->refs[j]);
			}
		}
		wr(f, t, dir, "event-channel", q->port);
	}
	if (f->nq > 1)
		wr(f, t, f->fdir, "multi-queue-num-queues", f->nq);
	{
		char p[XBD_XS_PATH_MAX];

		xbd_xs_pathf(p, sizeof(p), "%s/protocol", f->fdir);
		if (xbd_xs_write_str(xs, t, p, xbd_abi_protocol(f->abi)))
			die("cannot write protocol");
	}
	wr(f, t, f->fdir, "feature-persistent", f->persistent);
	wr(f, t, f->fdir, "state", connect_state);
	return 0;
}

static void fe_connect(struct fe *f)
{
	unsigned int i;
	int st, err;

	/* Left over from an earlier run: reset, as a rebooted guest would. */
	if (xbd_xenbus_read_state(f->xs, f->fdir) != XenbusStateInitialising)
		wr(f, XBT_NULL, f->fdir, "state", XenbusStateInitialising);
	st = wait_backend(f, 1u << XenbusStateInitWait, TIMEOUT_MS);
	if (st < 0)
		die("backend %s never reached InitWait: %s", f->bdir, strerror(-st));
	for (i = 0; i < f->nq; i++)
		setup_queue(f, i);
	err = xbd_xs_transact(f->xs, write_keys, f);
	if (err)
		die("writing the frontend keys: %s", strerror(-err));
	st = wait_backend(f, 1u << XenbusStateConnected | 1u << XenbusStateClosing |
				     1u << XenbusStateClosed, TIMEOUT_MS);
	if (st != XenbusStateConnected)
		die("backend did not connect (state %d)", st);
	f->sectors = rd_uint(f, f->bdir, "sectors", 0);
	f->sector_size = rd_uint(f, f->bdir, "sector-size", 512);
	f->max_indirect = rd_uint(f, f->bdir, "feature-max-indirect-segments", 0);
	f->flush = rd_uint(f, f->bdir, "feature-flush-cache", 0);
	f->barrier = rd_uint(f, f->bdir, "feature-barrier", 0);
	f->discard = rd_uint(f, f->bdir, "feature-discard", 0);
	f->discard_gran = f->discard ? rd_uint(f, f->bdir, "discard-granularity", 0) : 0;
	f->readonly = rd_uint(f, f->bdir, "info", 0) & VDISK_READONLY;
	wr(f, XBT_NULL, f->fdir, "state", XenbusStateConnected);
}

static void fe_open(struct fe *f)
{
	char p[XBD_XS_PATH_MAX], *s = NULL;
	int err;

	err = xbd_platform_open(XBD_PLATFORM_AUTO, &f->p);
	if (err)
		die("platform: %s", strerror(-err));
	f->me = xbd_platform_domid(f->p);
	err = xbd_xs_open(&f->xs);
	if (err)
		die("xenstore: %s", strerror(-err));
	err = xbd_evtchn_open(f->p, &f->ev);
	if (err)
		die("evtchn: %s", strerror(-err));
	xbd_xs_pathf(f->fdir, sizeof(f->fdir), "/local/domain/%u/device/vbd/%u", f->me, f->devid);
	xbd_xs_pathf(p, sizeof(p), "%s/backend", f->fdir);
	err = xbd_xs_read_str(f->xs, XBT_NULL, p, &s);
	if (err)
		die("cannot read %s: %s", p, strerror(-err));
	snprintf(f->bdir, sizeof(f->bdir), "%s", s);
	free(s);
	f->bdom = rd_uint(f, f->fdir, "backend-id", 0);
	f->pool = xbd_gnt_share(f->p, f->bdom, POOL_PAGES, true, f->pool_refs);
	if (!f->pool)
		die("cannot share the data pages: %s", strerror(errno));
}

/* ---- requests ---- */

static void kick(struct fe *f, unsigned int qi)
{
	if (xbd_front_push(&f->q[qi].ring)) {
		f->notify_sent++;
		xbd_evtchn_notify(f->ev, f->q[qi].port);
	}
}

static void wait_event(struct fe *f, int ms)
{
	struct pollfd pfd = { .fd = xbd_evtchn_fd(f->ev), .events = POLLIN };
	int port;

	if (poll(&pfd, 1, ms) > 0) {
		while ((port = xbd_evtchn_pending(f->ev)) >= 0) {
			f->notify_recv++;
			xbd_evtchn_unmask(f->ev, port);
		}
	}
}

/* Wait for the response to id on queue qi. */
static int16_t wait_rsp(struct fe *f, unsigned int qi, uint64_t id)
{
	uint64_t end = now_ms() + TIMEOUT_MS;
	struct xbd_response rsp[64];
	int n, i;

	for (;;) {
		n = xbd_front_consume(&f->q[qi].ring, rsp, 64);
		if (n < 0)
			die("response ring corrupt: %s", strerror(-n));
		for (i = 0; i < n; i++)
			if (rsp[i].id == id)
				return rsp[i].status;
		if (n)
			continue;
		if (xbd_front_final_check(&f->q[qi].ring))
			continue;
		if (now_ms() > end)
			die("no response to request %" PRIu64 " within %d ms", id, TIMEOUT_MS);
		wait_event(f, 100);
	}
}

static int16_t submit_wait(struct fe *f, unsigned int qi, struct xbd_request *r)
{
	int err;

	r->id = f->next_id++;
	err = xbd_front_put_request(&f->q[qi].ring, r);
	if (err)
		die("put_request: %s", strerror(-err));
	kick(f, qi);
	return wait_rsp(f, qi, r->id);
}

/* Write a raw native blkif_request, bypassing every check of ring.h. */
static void *raw_slot(struct fe *f, unsigned int qi)
{
	struct xbd_ring *r = &f->q[qi].ring;

	return (char *)r->sring + offsetof(struct blkif_sring, ring) +
	       (size_t)(r->req_prod_pvt & (r->nr_ents - 1)) * r->ent_size;
}

static int16_t raw_submit_wait(struct fe *f, unsigned int qi, const void *req, size_t len)
{
	char *slot = raw_slot(f, qi);
	uint64_t id = f->next_id++;

	if (len > f->q[qi].ring.ent_size)
		len = f->q[qi].ring.ent_size;
	memcpy(slot, req, len);
	/* The id sits at offset 8, or 4 in the packed x86_32 layout. */
	memcpy(slot + (f->abi == XBD_ABI_X86_32 ? 4 : 8), &id, sizeof(id));
	f->q[qi].ring.req_prod_pvt++;
	kick(f, qi);
	return wait_rsp(f, qi, id);
}

static void pattern(void *buf, uint64_t sector, unsigned int nsect, unsigned int seed)
{
	uint64_t *w = buf;
	unsigned int s, j;

	for (s = 0; s < nsect; s++)
		for (j = 0; j < 64; j++)
			w[s * 64 + j] = (sector + s) * 0x9E3779B97F4A7C15ull ^ (j + seed * 0x100000001ull);
}

static char *page(struct fe *f, unsigned int i)
{
	return f->pool + (size_t)i * XBD_PAGE_SIZE;
}

/* A read or write of npages whole pages from pool page pg, direct or indirect. */
static int16_t io(struct fe *f, unsigned int qi, uint8_t op, uint64_t sector, unsigned int npages,
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
		struct blkif_request_segment *seg = (void *)page(f, POOL_PAGES - 1);

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
	return submit_wait(f, qi, &r);
}

static void expect(int16_t got, int16_t want, const char *what)
{
	if (got != want)
		die("%s: status %d, expected %d", what, got, want);
	say("%s: status %d as expected", what, got);
}

/* Write a pattern at sector, read it back through other pages, compare. */
static void write_read_verify(struct fe *f, unsigned int qi, uint64_t sector, unsigned int npages,
			      bool indirect, unsigned int seed)
{
	unsigned int per = indirect ? npages : (npages > 11 ? 11 : npages), done;

	pattern(page(f, 0), sector, npages * 8, seed);
	for (done = 0; done < npages; done += per)
		expect(io(f, qi, BLKIF_OP_WRITE, sector + done * 8ull,
			  npages - done < per ? npages - done : per, done, indirect),
		       BLKIF_RSP_OKAY, "write");
	memset(page(f, 280), 0xee, (size_t)npages * XBD_PAGE_SIZE);
	for (done = 0; done < npages; done += per)
		expect(io(f, qi, BLKIF_OP_READ, sector + done * 8ull,
			  npages - done < per ? npages - done : per, 280 + done, indirect),
		       BLKIF_RSP_OKAY, "read");
	if (memcmp(page(f, 0), page(f, 280), (size_t)npages * XBD_PAGE_SIZE))
		die("data read back differs from data written (sector %" PRIu64 ", %u pages)", sector,
		    npages);
	say("verified %u pages at sector %" PRIu64 " on queue %u", npages, sector, qi);
}

/* Sub-page segments: sectors 1..3 of one page and 5..7 of another. */
static void partial_segments(struct fe *f)
{
	struct xbd_request r;
	char *a = page(f, 0), *b = page(f, 1);

	pattern(a + 512, 1000, 3, 7);
	pattern(b + 5 * 512, 1003, 3, 7);
	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_WRITE;
	r.sector_number = 1000;
	r.nr_segments = 2;
	r.seg[0] = (struct xbd_seg){ f->pool_refs[0], 1, 3 };
	r.seg[1] = (struct xbd_seg){ f->pool_refs[1], 5, 7 };
	expect(submit_wait(f, 0, &r), BLKIF_RSP_OKAY, "partial-segment write");
	memset(page(f, 2), 0, XBD_PAGE_SIZE);
	expect(io(f, 0, BLKIF_OP_READ, 1000, 1, 2, false), BLKIF_RSP_OKAY, "read");
	if (memcmp(page(f, 2), a + 512, 3 * 512) || memcmp(page(f, 2) + 3 * 512, b + 5 * 512, 3 * 512))
		die("partial segments read back wrong");
	say("partial segments verified");
}

/* ---- scenarios ---- */

static void sc_rw(struct fe *f)
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
static void sc_outage(struct fe *f)
{
	uint64_t end = now_ms() + (uint64_t)(secs * 1000), worst = 0;
	unsigned int n, ok = 0, failed = 0, ok_after = 0;

	for (n = 0; now_ms() < end; n++) {
		uint64_t t0 = now_ms(), sector = 8 + (n % 64) * 8ull;
		int16_t w, r;

		pattern(page(f, 0), sector, 8, n);
		w = io(f, 0, BLKIF_OP_WRITE, sector, 1, 0, false);
		memset(page(f, 1), 0xee, XBD_PAGE_SIZE);
		r = w == BLKIF_RSP_OKAY ? io(f, 0, BLKIF_OP_READ, sector, 1, 1, false) : w;
		if (now_ms() - t0 > worst)
			worst = now_ms() - t0;
		if (w == BLKIF_RSP_OKAY && r == BLKIF_RSP_OKAY) {
			if (memcmp(page(f, 0), page(f, 1), XBD_PAGE_SIZE))
				die("outage: read back differs at sector %" PRIu64, sector);
			ok++;
			ok_after += failed > 0;
		} else if (w == BLKIF_RSP_ERROR || r == BLKIF_RSP_ERROR) {
			failed++;
			ok_after = 0;
		} else {
			die("outage: status %d/%d", w, r);
		}
		usleep(20000);
	}
	say("outage: %u verified, %u failed, %u verified after the last failure, slowest %" PRIu64
	    " ms", ok, failed, ok_after, worst);
	if (!failed)
		die("outage: no request failed: the storage never went away");
	if (!ok_after)
		die("outage: nothing succeeded after the failures: no reconnect");
	if (worst > 5000)
		die("outage: a request took %" PRIu64 " ms", worst);
}

static void sc_flush(struct fe *f)
{
	struct xbd_request r;

	memset(&r, 0, sizeof(r));
	write_read_verify(f, 0, 8, 4, false, 5);
	if (f->flush) {
		r.operation = BLKIF_OP_FLUSH_DISKCACHE;
		expect(submit_wait(f, 0, &r), BLKIF_RSP_OKAY, "flush");
		r.operation = BLKIF_OP_WRITE_BARRIER;
		expect(submit_wait(f, 0, &r), BLKIF_RSP_EOPNOTSUPP, "barrier not offered");
	} else if (f->barrier) {
		r.operation = BLKIF_OP_FLUSH_DISKCACHE;
		expect(submit_wait(f, 0, &r), BLKIF_RSP_EOPNOTSUPP, "flush not offered");
		r.operation = BLKIF_OP_WRITE_BARRIER;
		expect(submit_wait(f, 0, &r), BLKIF_RSP_OKAY, "empty barrier");
		pattern(page(f, 0), 40, 8, 11);
		expect(io(f, 0, BLKIF_OP_WRITE_BARRIER, 40, 1, 0, false), BLKIF_RSP_OKAY,
		       "barrier write");
		memset(page(f, 1), 0, XBD_PAGE_SIZE);
		expect(io(f, 0, BLKIF_OP_READ, 40, 1, 1, false), BLKIF_RSP_OKAY, "read");
		if (memcmp(page(f, 0), page(f, 1), XBD_PAGE_SIZE))
			die("barrier write did not land");
		if (f->max_indirect)
			die("barrier mode must not offer indirect descriptors");
	} else {
		die("backend offers neither flush nor barrier");
	}
}

/*
 * Storage that discards only whole granules (RBD: 64 KiB): three granules
 * written, the middle one discarded, read back as zeros between
 * unchanged neighbours.
 */
static void discard_granule(struct fe *f)
{
	unsigned int gpages = f->discard_gran / XBD_PAGE_SIZE, n = 3 * gpages, done, per;
	uint64_t gsect = f->discard_gran / 512, base = 4 * gsect;
	struct xbd_request r;
	char *zero;

	if (f->discard_gran % XBD_PAGE_SIZE || n > 240)
		die("discard-granularity %u: not a multiple of 4 KiB up to 320 KiB", f->discard_gran);
	write_read_verify(f, 0, base, n, false, 6);
	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_DISCARD;
	r.sector_number = base + gsect;
	r.nr_sectors = gsect;
	expect(submit_wait(f, 0, &r), BLKIF_RSP_OKAY, "discard of one granule");
	memset(page(f, 600), 0xee, (size_t)n * XBD_PAGE_SIZE);
	for (done = 0; done < n; done += per) {
		per = n - done < 11 ? n - done : 11;
		expect(io(f, 0, BLKIF_OP_READ, base + done * 8ull, per, 600 + done, false),
		       BLKIF_RSP_OKAY, "read");
	}
	zero = calloc(gpages, XBD_PAGE_SIZE);
	if (!zero)
		die("out of memory");
	if (memcmp(page(f, 600), page(f, 0), (size_t)gpages * XBD_PAGE_SIZE) ||
	    memcmp(page(f, 600 + gpages), zero, (size_t)gpages * XBD_PAGE_SIZE) ||
	    memcmp(page(f, 600 + 2 * gpages), page(f, 2 * gpages), (size_t)gpages * XBD_PAGE_SIZE))
		die("the discarded granule does not read back as zeros (or its neighbours changed)");
	free(zero);
	say("a discarded %u-byte granule reads back as zeros", f->discard_gran);
}

static void sc_discard(struct fe *f)
{
	struct xbd_request r;
	static char zero[XBD_PAGE_SIZE];

	if (!f->discard)
		die("backend does not offer feature-discard");
	if (f->discard_gran > 8192) {
		discard_granule(f);
		return;
	}
	write_read_verify(f, 0, 512, 4, false, 6);
	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_DISCARD;
	r.sector_number = 520;
	r.nr_sectors = 16;
	expect(submit_wait(f, 0, &r), BLKIF_RSP_OKAY, "discard");
	memset(page(f, 300), 0xee, 4 * XBD_PAGE_SIZE);
	expect(io(f, 0, BLKIF_OP_READ, 512, 4, 300, false), BLKIF_RSP_OKAY, "read");
	if (memcmp(page(f, 300), page(f, 0), XBD_PAGE_SIZE) ||
	    memcmp(page(f, 301), zero, XBD_PAGE_SIZE) || memcmp(page(f, 302), zero, XBD_PAGE_SIZE) ||
	    memcmp(page(f, 303), page(f, 3), XBD_PAGE_SIZE))
		die("discarded range does not read back as zeros (or its neighbours changed)");
	say("discarded sectors read back as zeros");
}

static void sc_indirect(struct fe *f)
{
	if (f->max_indirect < 256)
		die("backend offers only %u indirect segments", f->max_indirect);
	write_read_verify(f, 0, 2048, 256, true, 8); /* 1 MiB */
	write_read_verify(f, 0, 8, 13, true, 12);
}

static void sc_readonly(struct fe *f)
{
	if (!f->readonly)
		die("backend info does not say read-only");
	expect(io(f, 0, BLKIF_OP_WRITE, 8, 1, 0, false), BLKIF_RSP_ERROR, "write to read-only disk");
	expect(io(f, 0, BLKIF_OP_READ, 8, 1, 0, false), BLKIF_RSP_OKAY, "read of read-only disk");
}

/* The device must still work after a refused request. */
static void still_works(struct fe *f)
{
	write_read_verify(f, 0, 16, 2, false, 99);
}

static void raw_rw(struct fe *f, uint8_t op, uint64_t sector, unsigned int nseg, uint8_t first,
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
	expect(raw_submit_wait(f, 0, &r, sizeof(r)), want, what);
}

static void sc_hostile(struct fe *f, const char *name)
{
	if (!strcmp(name, "bad-op")) {
		raw_rw(f, 99, 0, 1, 0, 7, BLKIF_RSP_ERROR, "unknown op 99");
		raw_rw(f, BLKIF_OP_RESERVED_1, 0, 1, 0, 7, BLKIF_RSP_ERROR, "reserved op 4");
	} else if (!strcmp(name, "bad-burst")) {
		unsigned int i;

		for (i = 0; i < 30; i++)
			raw_rw(f, 99, 0, 1, 0, 7, BLKIF_RSP_ERROR, "unknown op 99");
	} else if (!strcmp(name, "garbage")) {
		/*
		 * Random requests, mostly invalid, some valid by chance: each
		 * must be answered with OKAY, ERROR or EOPNOTSUPP.
		 */
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
				die("request %u answered with status %d", i, st);
		}
		say("garbage: %u okay, %u error, %u not supported", okay, err, nots);
	} else if (!strcmp(name, "nseg0")) {
		raw_rw(f, BLKIF_OP_READ, 0, 0, 0, 7, BLKIF_RSP_ERROR, "read with 0 segments");
	} else if (!strcmp(name, "nseg12")) {
		raw_rw(f, BLKIF_OP_READ, 0, 12, 0, 7, BLKIF_RSP_ERROR, "read with 12 segments");
	} else if (!strcmp(name, "first-gt-last")) {
		raw_rw(f, BLKIF_OP_READ, 0, 1, 5, 2, BLKIF_RSP_ERROR, "first_sect > last_sect");
	} else if (!strcmp(name, "last8")) {
		raw_rw(f, BLKIF_OP_READ, 0, 1, 0, 8, BLKIF_RSP_ERROR, "last_sect 8");
	} else if (!strcmp(name, "beyond-end")) {
		raw_rw(f, BLKIF_OP_READ, f->sectors - 4, 1, 0, 7, BLKIF_RSP_ERROR,
		       "read past the end");
		raw_rw(f, BLKIF_OP_WRITE, f->sectors, 1, 0, 0, BLKIF_RSP_ERROR, "write at the end");
	} else if (!strcmp(name, "overflow")) {
		raw_rw(f, BLKIF_OP_READ, UINT64_MAX - 3, 1, 0, 7, BLKIF_RSP_ERROR,
		       "sector range that overflows");
	} else if (!strcmp(name, "indirect-too-many")) {
		struct blkif_request_indirect r;
		struct blkif_request_segment *seg = (void *)page(f, POOL_PAGES - 1);
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
		expect(raw_submit_wait(f, 0, &r, sizeof(r)), BLKIF_RSP_ERROR,
		       "indirect with more segments than offered");
		r.nr_segments = 4;
		r.indirect_op = BLKIF_OP_DISCARD;
		expect(raw_submit_wait(f, 0, &r, sizeof(r)), BLKIF_RSP_ERROR,
		       "indirect wrapping a discard");
	} else if (!strcmp(name, "gref-bad") || !strcmp(name, "gref-other") ||
		   !strcmp(name, "gref-ro")) {
		struct blkif_request r;
		uint32_t ref = 0;
		void *pg = NULL;

		if (!strcmp(name, "gref-bad")) {
			ref = f->pool_refs[POOL_PAGES - 1] + 5000; /* never granted */
		} else if (!strcmp(name, "gref-other")) {
			pg = xbd_gnt_share(f->p, f->bdom + 100, 1, true, &ref);
			if (!pg)
				die("cannot grant to domain %u: %s", f->bdom + 100, strerror(errno));
		} else {
			pg = xbd_gnt_share(f->p, f->bdom, 1, false, &ref);
			if (!pg)
				die("cannot grant read-only: %s", strerror(errno));
		}
		memset(&r, 0, sizeof(r));
		r.operation = BLKIF_OP_READ;
		r.nr_segments = 2;
		r.sector_number = 0;
		r.seg[0] = (struct blkif_request_segment){ f->pool_refs[0], 0, 7 };
		r.seg[1] = (struct blkif_request_segment){ ref, 0, 7 };
		expect(raw_submit_wait(f, 0, &r, sizeof(r)), BLKIF_RSP_ERROR, name);
		if (pg && xbd_gnt_unshare(f->p, pg, 1))
			die("the backend still maps the page of a refused request");
	} else {
		die("unknown scenario %s", name);
	}
	still_works(f);
}

/* req_prod far past the ring: the backend must disconnect this device. */
static void sc_ring_overflow(struct fe *f)
{
	struct blkif_sring *s = f->q[0].sring;
	int st;

	still_works(f);
	__atomic_store_n(&s->req_prod, s->rsp_prod + f->q[0].ring.nr_ents + 5, __ATOMIC_SEQ_CST);
	xbd_evtchn_notify(f->ev, f->q[0].port);
	st = wait_backend(f, 1u << XenbusStateClosing | 1u << XenbusStateClosed, TIMEOUT_MS);
	if (st < 0)
		die("backend did not close after a corrupt ring: %s", strerror(-st));
	say("backend went to %s after req_prod ran past the ring", xbd_xenbus_state_name(st));
	wr(f, XBT_NULL, f->fdir, "state", XenbusStateClosed);
}

/* Notifications with no request behind them. */
static void sc_flood(struct fe *f)
{
	uint64_t end = now_ms() + (uint64_t)(secs * 1000), n = 0;

	still_works(f);
	while (now_ms() < end) {
		unsigned int i;

		for (i = 0; i < 1000; i++)
			xbd_evtchn_notify(f->ev, f->q[0].port);
		n += 1000;
	}
	say("sent %" PRIu64 " notifications", n);
	still_works(f);
}

/* Requests whose responses are never consumed: the backend must answer them all. */
static void sc_noconsume(struct fe *f)
{
	struct xbd_ring *r = &f->q[0].ring;
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
		if (xbd_front_put_request(r, &q))
			die("ring full after %u requests", i);
	}
	kick(f, 0);
	end = now_ms() + TIMEOUT_MS;
	while (__atomic_load_n(&s->rsp_prod, __ATOMIC_ACQUIRE) != r->req_prod_pvt) {
		if (now_ms() > end)
			die("backend answered %u of %u requests", s->rsp_prod - r->rsp_cons, n);
		usleep(1000);
	}
	say("backend answered all %u requests of a full ring that nobody consumes", n);
	/* One more notification: nothing new, the backend must not answer twice. */
	xbd_evtchn_notify(f->ev, f->q[0].port);
	usleep(100000);
	if (s->rsp_prod != r->req_prod_pvt)
		die("backend produced responses without requests");
}

/* A frontend that closes and reconnects with fresh rings. */
static void sc_reconnect(struct fe *f)
{
	int st;

	still_works(f);
	wr(f, XBT_NULL, f->fdir, "state", XenbusStateClosing);
	st = wait_backend(f, 1u << XenbusStateClosing | 1u << XenbusStateClosed, TIMEOUT_MS);
	if (st < 0)
		die("backend did not follow the frontend to Closing");
	wr(f, XBT_NULL, f->fdir, "state", XenbusStateClosed);
	st = wait_backend(f, 1u << XenbusStateClosed, TIMEOUT_MS);
	if (st < 0)
		die("backend did not reach Closed");
	for (unsigned int i = 0; i < f->nq; i++) {
		if (xbd_gnt_unshare(f->p, f->q[i].sring, f->q[i].npages))
			die("backend still maps the old ring after Closed");
		f->q[i].sring = NULL;
		xbd_evtchn_unbind(f->ev, f->q[i].port);
	}
	wr(f, XBT_NULL, f->fdir, "state", XenbusStateInitialising);
	say("reconnecting");
	fe_connect(f);
	still_works(f);
}

/*
 * More distinct grants than the backend's persistent grant cache holds
 * (1056 per ring): data must stay intact while the LRU evicts.
 */
static void sc_lru(struct fe *f)
{
	const unsigned int n = 1100, per = 11;
	char *copy = malloc((size_t)n * XBD_PAGE_SIZE);
	unsigned int i, round;

	if (!copy)
		die("out of memory");
	for (round = 0; round < 2; round++) {
		pattern(page(f, 0), 4096, n * 8, 20 + round);
		memcpy(copy, page(f, 0), (size_t)n * XBD_PAGE_SIZE);
		for (i = 0; i < n; i += per)
			if (io(f, 0, BLKIF_OP_WRITE, 4096 + i * 8ull, per, i, false) != BLKIF_RSP_OKAY)
				die("write %u failed", i);
		memset(page(f, 0), 0, (size_t)n * XBD_PAGE_SIZE);
		for (i = 0; i < n; i += per)
			if (io(f, 0, BLKIF_OP_READ, 4096 + i * 8ull, per, i, false) != BLKIF_RSP_OKAY)
				die("read %u failed", i);
		if (memcmp(copy, page(f, 0), (size_t)n * XBD_PAGE_SIZE))
			die("data differs after cycling %u grants (round %u)", n, round);
	}
	free(copy);
	say("%u distinct grants cycled twice, data intact", n);
}

/* Work, wait until the file $RAWFRONT_GO exists (the test restarts the backend), work again. */
static void sc_pause(struct fe *f)
{
	const char *go = getenv("RAWFRONT_GO");
	uint64_t end = now_ms() + 4 * TIMEOUT_MS;

	if (!go)
		die("pause needs RAWFRONT_GO");
	still_works(f);
	say("paused");
	while (access(go, F_OK)) {
		if (now_ms() > end)
			die("%s never appeared", go);
		usleep(20000);
	}
	still_works(f);
}

/*
 * Across a backend that is killed and restarted (the crash tests): 40
 * rounds of --qd (default 24) one-page writes of distinct patterns, then
 * a barrier or a flush if offered, all pushed at once; every response is
 * awaited for up to 60 s, each id must be answered exactly once and OKAY;
 * then every page written is read back and compared.
 */
static void sc_survive(struct fe *f)
{
	struct xbd_ring *ring = &f->q[0].ring;
	unsigned int n = qd > 1 ? qd : 24, round, i, got;

	if (n > ring->nr_ents - 1)
		n = ring->nr_ents - 1;
	if (n > 64)
		n = 64;
	for (round = 0; round < 40; round++) {
		uint64_t base = f->next_id, end = now_ms() + 60000;
		unsigned int total = n + (f->barrier || f->flush);
		bool seen[65] = { false };
		struct xbd_request r;

		for (i = 0; i < total; i++) {
			uint64_t sector = ((uint64_t)(round % 8) * 65 + i) * 8;

			memset(&r, 0, sizeof(r));
			r.id = f->next_id++;
			if (i < n || f->barrier) {
				/* A barrier carries data: it must land after the writes before it. */
				r.operation = i < n ? BLKIF_OP_WRITE : BLKIF_OP_WRITE_BARRIER;
				r.sector_number = sector;
				r.nr_segments = 1;
				r.seg[0] = (struct xbd_seg){ f->pool_refs[i], 0, 7 };
				pattern(page(f, i), sector, 8, round + 1);
			} else {
				r.operation = BLKIF_OP_FLUSH_DISKCACHE;
			}
			if (xbd_front_put_request(ring, &r))
				die("put_request failed");
		}
		kick(f, 0);
		for (got = 0; got < total;) {
			struct xbd_response rsp[64];
			int k, m = xbd_front_consume(ring, rsp, 64);

			if (m < 0)
				die("response ring corrupt: %s", strerror(-m));
			for (k = 0; k < m; k++) {
				uint64_t idx = rsp[k].id - base;

				if (rsp[k].id < base || idx >= total || seen[idx])
					die("round %u: request %" PRIu64 " answered twice (or never asked)",
					    round, rsp[k].id);
				seen[idx] = true;
				got++;
				if (rsp[k].status != BLKIF_RSP_OKAY)
					die("round %u: request %" PRIu64 " failed with status %d", round,
					    rsp[k].id, rsp[k].status);
			}
			if (m || xbd_front_final_check(ring))
				continue;
			if (now_ms() > end)
				die("round %u: %u of %u requests unanswered after 60 s", round,
				    total - got, total);
			wait_event(f, 100);
		}
		for (i = 0; i < n + (f->barrier ? 1 : 0); i++) {
			uint64_t sector = ((uint64_t)(round % 8) * 65 + i) * 8;

			memset(page(f, 300), 0xee, XBD_PAGE_SIZE);
			if (io(f, 0, BLKIF_OP_READ, sector, 1, 300, false) != BLKIF_RSP_OKAY)
				die("round %u: read back of sector %" PRIu64 " failed", round, sector);
			if (memcmp(page(f, 300), page(f, i), XBD_PAGE_SIZE))
				die("round %u: sector %" PRIu64 " reads back other data than written",
				    round, sector);
		}
	}
	say("survive: 40 rounds of %u writes%s, each answered once, all read back", n,
	    f->barrier ? " and a barrier" : f->flush ? " and a flush" : "");
}

/*
 * An exact amount of I/O for counter tests: 3 writes of 4 pages, 2 reads
 * of 2 pages, a flush, a discard of 8 sectors (each if offered) and one
 * request with a bad op; with RAWFRONT_GO it then pauses like "pause".
 */
static void sc_counted(struct fe *f)
{
	const char *go = getenv("RAWFRONT_GO");
	struct xbd_request r;
	unsigned int i;

	for (i = 0; i < 3; i++) {
		pattern(page(f, 0), i * 32, 32, i);
		expect(io(f, 0, BLKIF_OP_WRITE, i * 32, 4, 0, false), BLKIF_RSP_OKAY, "write");
	}
	for (i = 0; i < 2; i++)
		expect(io(f, 0, BLKIF_OP_READ, i * 16, 2, 10, false), BLKIF_RSP_OKAY, "read");
	memset(&r, 0, sizeof(r));
	if (f->flush) {
		r.operation = BLKIF_OP_FLUSH_DISKCACHE;
		expect(submit_wait(f, 0, &r), BLKIF_RSP_OKAY, "flush");
	}
	if (f->discard) {
		r.operation = BLKIF_OP_DISCARD;
		r.sector_number = 512;
		r.nr_sectors = 8;
		expect(submit_wait(f, 0, &r), BLKIF_RSP_OKAY, "discard");
	}
	raw_rw(f, 99, 0, 1, 0, 7, BLKIF_RSP_ERROR, "unknown op 99");
	say("counted: writes 3 (96 sectors), reads 2 (32 sectors), flushes %d, discards %d, "
	    "bad ops 1", f->flush, f->discard);
	if (go) {
		uint64_t end = now_ms() + 4 * TIMEOUT_MS;

		say("paused");
		while (access(go, F_OK)) {
			if (now_ms() > end)
				die("%s never appeared", go);
			usleep(20000);
		}
	}
}

/* The null engine: writes vanish, reads return zeros. */
static void sc_zeros(struct fe *f)
{
	static char zero[11 * XBD_PAGE_SIZE];

	pattern(page(f, 0), 8, 88, 3);
	expect(io(f, 0, BLKIF_OP_WRITE, 8, 11, 0, false), BLKIF_RSP_OKAY, "write");
	memset(page(f, 20), 0xee, sizeof(zero));
	expect(io(f, 0, BLKIF_OP_READ, 8, 11, 20, false), BLKIF_RSP_OKAY, "read");
	if (memcmp(page(f, 20), zero, sizeof(zero)))
		die("reads did not return zeros");
	say("reads return zeros");
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

static void sc_stress(struct fe *f)
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
		die("disk too small for stress at qd %u", qd);
	shadow = calloc(nblk, XBD_PAGE_SIZE);
	if (!shadow)
		die("out of memory");
	/* The disk must be fresh (all zeros), as the shadow starts. */
	memset(slot, 0, sizeof(slot));
	end = now_ms() + (uint64_t)(secs * 1000);
	/*
	 * A backend (or domain) that goes away must not leave us waiting
	 * forever: fail when nothing was answered for TIMEOUT_MS, and in any
	 * case TIMEOUT_MS after the end of the run.
	 */
	deadline = end + TIMEOUT_MS;
	answered = now_ms();
	for (;;) {
		bool more = now_ms() < end;
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
			if (xbd_front_free(&f->q[sl->qi].ring) == 0)
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
					pattern(page(f, pg0), sl->block * 8, sl->nblocks * 8, (unsigned int)seed);
					memcpy(shadow + sl->block * XBD_PAGE_SIZE, page(f, pg0),
					       sl->nblocks * XBD_PAGE_SIZE);
				} else {
					memset(page(f, pg0), 0xee, sl->nblocks * XBD_PAGE_SIZE);
				}
				if (sl->nblocks > 11) {
					struct blkif_request_segment *seg = (void *)page(f, 1100 + i);

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
			if (xbd_front_put_request(&f->q[sl->qi].ring, &r))
				die("put_request failed");
			sl->busy = true;
			busy++;
		}
		for (qi = 0; qi < f->nq; qi++)
			kick(f, qi);
		if (!more && !busy)
			break;
		for (;;) {
			unsigned int got = 0;

			for (qi = 0; qi < f->nq; qi++) {
				int n = xbd_front_consume(&f->q[qi].ring, rsp, 64), j;

				if (n < 0)
					die("response ring corrupt");
				for (j = 0; j < n; j++) {
					struct stress_slot *sl;

					if (rsp[j].id >= qd || !slot[rsp[j].id].busy)
						die("response for an unknown id %" PRIu64, rsp[j].id);
					sl = &slot[rsp[j].id];
					if (rsp[j].status != BLKIF_RSP_OKAY)
						die("op %u at block %" PRIu64 " failed: %d", sl->op, sl->block,
						    rsp[j].status);
					if (sl->op == BLKIF_OP_READ &&
					    memcmp(page(f, rsp[j].id * STRESS_PAGES),
						   shadow + sl->block * XBD_PAGE_SIZE,
						   sl->nblocks * XBD_PAGE_SIZE))
						die("read of %" PRIu64 " blocks at block %" PRIu64
						    " differs from what was written", sl->nblocks, sl->block);
					sl->busy = false;
					busy--;
					ops++;
				}
				got += n;
			}
			if (got) {
				answered = now_ms();
				break;
			}
			for (qi = 0; qi < f->nq; qi++)
				if (xbd_front_final_check(&f->q[qi].ring))
					got++;
			if (got)
				continue;
			if (busy && now_ms() > answered + TIMEOUT_MS)
				die("stress: %u request(s) in flight and none answered for %d ms",
				    busy, TIMEOUT_MS);
			if (now_ms() > deadline)
				die("stress: %u request(s) unanswered %d ms after the end of the run",
				    busy, TIMEOUT_MS);
			wait_event(f, 100);
		}
	}
	free(shadow);
	say("stress: %" PRIu64 " requests at qd %u on %u queue(s), all verified", ops, qd, f->nq);
}

/* Random 4 KiB reads at queue depth qd for secs seconds. */
static void sc_bench(struct fe *f)
{
	struct xbd_ring *r = &f->q[0].ring;
	uint64_t start = now_ms(), end = start + (uint64_t)(secs * 1000), done = 0, seed = 88172645463325252ull;
	unsigned int inflight = 0, i;
	struct xbd_response rsp[64];
	uint64_t pages = f->sectors / 8;

	if (qd > r->nr_ents)
		qd = r->nr_ents;
	for (;;) {
		bool more = now_ms() < end;

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
			if (xbd_front_put_request(r, &q))
				break;
			inflight++;
		}
		kick(f, 0);
		if (!more && !inflight)
			break;
		for (;;) {
			int n = xbd_front_consume(r, rsp, 64);

			if (n < 0)
				die("response ring corrupt");
			for (i = 0; i < (unsigned int)n; i++)
				if (rsp[i].status != BLKIF_RSP_OKAY)
					die("bench read failed: %d", rsp[i].status);
			inflight -= n;
			done += n;
			if (n)
				break;
			if (xbd_front_final_check(r))
				continue;
			wait_event(f, 100);
		}
	}
	end = now_ms();
	printf("bench: qd=%u reqs=%" PRIu64 " secs=%.2f iops=%.0f notify_sent/req=%.3f notify_recv/req=%.3f\n",
	       qd, done, (end - start) / 1000.0, done * 1000.0 / (end - start ? end - start : 1),
	       done ? (double)f->notify_sent / done : 0, done ? (double)f->notify_recv / done : 0);
}

/*
 * At exit, however we leave: end our grants and free their pages, so that
 * repeated runs in one domain do not use up its grant references and
 * memory.  Grants the backend still maps (a scenario that leaves the
 * device connected, or a failure mid-run) stay: they are in use.
 */
static struct fe *exit_fe;

static void fe_release(void)
{
	struct fe *f = exit_fe;

	if (!f || !f->p)
		return;
	exit_fe = NULL;
	for (unsigned int i = 0; i < MAXQ; i++)
		if (f->q[i].sring)
			xbd_gnt_unshare(f->p, f->q[i].sring, f->q[i].npages);
	if (f->pool)
		xbd_gnt_unshare(f->p, f->pool, POOL_PAGES);
	if (f->ev)
		xbd_evtchn_close(f->ev);
	if (f->xs)
		xbd_xs_close(f->xs);
	xbd_platform_close(f->p);
}

/* A well-behaved close: Closing, wait for the backend, Closed. */
static void fe_close(struct fe *f)
{
	int st;

	wr(f, XBT_NULL, f->fdir, "state", XenbusStateClosing);
	st = wait_backend(f, 1u << XenbusStateClosing | 1u << XenbusStateClosed, TIMEOUT_MS);
	if (st < 0)
		die("backend did not follow the frontend to Closing");
	wr(f, XBT_NULL, f->fdir, "state", XenbusStateClosed);
	st = wait_backend(f, 1u << XenbusStateClosed, TIMEOUT_MS);
	if (st < 0)
		die("backend did not reach Closed");
}

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
		{ NULL, 0, NULL, 0 },
	};
	static struct fe f;
	const char *sc;
	uint64_t t0;
	int c;

	f.devid = 51728;
	f.nq = 1;
	f.persistent = true;
	f.abi = XBD_ABI_NATIVE;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': f.devid = strtoul(optarg, NULL, 0); break;
		case 'o': f.order = strtoul(optarg, NULL, 0); break;
		case 'n': f.num_ring_pages = strtoul(optarg, NULL, 0); break;
		case 'q': f.nq = strtoul(optarg, NULL, 0); break;
		case 'p': f.persistent = atoi(optarg); break;
		case 's': secs = atof(optarg); break;
		case 'Q': qd = strtoul(optarg, NULL, 0); break;
		case 'S': connect_state = strtoul(optarg, NULL, 0); break;
		case 'P': order_per_queue = true; break;
		case 'a':
			if (!strcmp(optarg, "native"))
				f.abi = XBD_ABI_NATIVE;
			else if (xbd_abi_from_protocol(optarg, &f.abi))
				die("unknown abi %s", optarg);
			break;
		default:
			die("bad option");
		}
	}
	if (optind != argc - 1)
		die("usage: rawfront [options] SCENARIO");
	if (f.nq < 1 || f.nq > MAXQ)
		die("--queues must be 1..%d", MAXQ);
	sc = argv[optind];
	exit_fe = &f;
	atexit(fe_release);
	fe_open(&f);
	t0 = now_ms();
	fe_connect(&f);
	say("connected to %s in %" PRIu64 " ms: %" PRIu64 " sectors, %u queue(s), abi %s", f.bdir,
	    now_ms() - t0, f.sectors, f.nq, xbd_abi_protocol(f.abi));
	if (!strcmp(sc, "connect"))
		;
	else if (!strcmp(sc, "rw"))
		sc_rw(&f);
	else if (!strcmp(sc, "flush"))
		sc_flush(&f);
	else if (!strcmp(sc, "outage"))
		sc_outage(&f);
	else if (!strcmp(sc, "discard"))
		sc_discard(&f);
	else if (!strcmp(sc, "indirect"))
		sc_indirect(&f);
	else if (!strcmp(sc, "readonly"))
		sc_readonly(&f);
	else if (!strcmp(sc, "ring-overflow"))
		sc_ring_overflow(&f);
	else if (!strcmp(sc, "flood"))
		sc_flood(&f);
	else if (!strcmp(sc, "noconsume"))
		sc_noconsume(&f);
	else if (!strcmp(sc, "reconnect"))
		sc_reconnect(&f);
	else if (!strcmp(sc, "stress"))
		sc_stress(&f);
	else if (!strcmp(sc, "lru"))
		sc_lru(&f);
	else if (!strcmp(sc, "pause"))
		sc_pause(&f);
	else if (!strcmp(sc, "counted"))
		sc_counted(&f);
	else if (!strcmp(sc, "survive"))
		sc_survive(&f);
	else if (!strcmp(sc, "zeros"))
		sc_zeros(&f);
	else if (!strcmp(sc, "bench"))
		sc_bench(&f);
	else
		sc_hostile(&f, sc);
	/* "connect" and "survive" leave the device connected for the test to inspect. */
	if (strcmp(sc, "connect") && strcmp(sc, "ring-overflow") && strcmp(sc, "survive"))
		fe_close(&f);
	say("%s: ok", sc);
	return 0;
}
