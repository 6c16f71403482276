/*
 * evilfront.c: a hostile test frontend for what tests/blkback/rawfront.c
 * does not already do.  It acts as a domU (XBD_SIM_DOMID), connects one
 * single-page ring to the vbd backend DEVID and runs one scenario; exit 0
 * when the backend behaved.
 *
 *   evilfront [--dev DEVID] [--persistent 0|1] SCENARIO
 *
 *   req-prod-backwards  after a valid request, move req_prod back below
 *                       req_cons: the backend must disconnect (Closing)
 *   revoke-inflight     grant a page, submit a read or write with it and
 *                       revoke the grant at once, 300 times: each request is
 *                       answered OKAY (the backend mapped it first; the
 *                       revoke then fails with EBUSY, as in Xen) or ERROR
 *                       (the map failed), and the page can always be
 *                       revoked once the response is in
 *   indirect-bad-page   indirect requests whose indirect page reference is
 *                       not granted, beyond the grant table, or whose
 *                       second page is missing; segments inside the page
 *                       naming bad grants: each fails with ERROR
 *   indirect-unaligned  segments inside an indirect page with
 *                       first_sect > last_sect or last_sect 8: ERROR
 *   rw                  well-behaved: 32 verified page writes (uses 65 guest
 *                       pages where rawfront uses 1200, for churn tests)
 * After each (except req-prod-backwards) a write and read-back must work.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"
#include "ring/ring.h"
#include "xenstore/xenbus.h"

#define POOL 64
#define TIMEOUT_MS 10000

struct fe {
	struct xbd_platform *p;
	struct xbd_xs *xs;
	struct xbd_evtchn *ev;
	uint32_t me, bdom, devid;
	char fdir[XBD_XS_PATH_MAX], bdir[XBD_XS_PATH_MAX];
	bool persistent;
	void *sring;
	uint32_t ring_ref;
	struct xbd_ring ring;
	int port;
	char *pool;
	uint32_t refs[POOL];
	uint64_t sectors, next_id;
	unsigned int max_indirect;
};

#define die(...) do { fprintf(stderr, "evilfront: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define say(...) do { printf("evilfront: " __VA_ARGS__); putchar('\n'); fflush(stdout); } while (0)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wr(struct fe *f, xs_transaction_t t, const char *k, uint64_t v)
{
	char p[XBD_XS_PATH_MAX];

	xbd_xs_pathf(p, sizeof(p), "%s/%s", f->fdir, k);
	if (xbd_xs_write_uint(f->xs, t, p, v))
		die("cannot write %s", p);
}

static uint64_t rd(struct fe *f, const char *k, uint64_t dflt)
{
	char p[XBD_XS_PATH_MAX];
	uint64_t v;

	xbd_xs_pathf(p, sizeof(p), "%s/%s", f->bdir, k);
	return xbd_xs_read_uint(f->xs, XBT_NULL, p, 0, UINT64_MAX, &v) ? dflt : v;
}

static int keys(struct xbd_xs *xs, xs_transaction_t t, void *arg)
{
	struct fe *f = arg;
	char p[XBD_XS_PATH_MAX];

	wr(f, t, "ring-ref", f->ring_ref);
	wr(f, t, "event-channel", (uint64_t)f->port);
	wr(f, t, "feature-persistent", f->persistent);
	xbd_xs_pathf(p, sizeof(p), "%s/protocol", f->fdir);
	if (xbd_xs_write_str(xs, t, p, xbd_abi_protocol(XBD_ABI_NATIVE)))
		die("cannot write protocol");
	wr(f, t, "state", XenbusStateInitialised);
	return 0;
}

static int wait_backend(struct fe *f, unsigned int mask)
{
	enum xenbus_state st;
	int err = xbd_xenbus_wait_state(f->xs, f->bdir, mask, TIMEOUT_MS, &st);

	return err ? err : (int)st;
}

static void fe_connect(struct fe *f)
{
	char p[XBD_XS_PATH_MAX], *s = NULL;
	int err;

	if ((err = xbd_platform_open(XBD_PLATFORM_AUTO, &f->p)) || (err = xbd_xs_open(&f->xs)) ||
	    (err = xbd_evtchn_open(f->p, &f->ev)))
		die("cannot open the platform: %s", strerror(-err));
	f->me = xbd_platform_domid(f->p);
	xbd_xs_pathf(f->fdir, sizeof(f->fdir), "/local/domain/%u/device/vbd/%u", f->me, f->devid);
	xbd_xs_pathf(p, sizeof(p), "%s/backend", f->fdir);
	if (xbd_xs_read_str(f->xs, XBT_NULL, p, &s))
		die("cannot read %s", p);
	snprintf(f->bdir, sizeof(f->bdir), "%s", s);
	free(s);
	f->bdom = 0;
	/* Left over from an earlier run: start over, as a rebooted guest would. */
	if (xbd_xenbus_read_state(f->xs, f->fdir) != XenbusStateInitialising)
		wr(f, XBT_NULL, "state", XenbusStateInitialising);
	if (wait_backend(f, 1u << XenbusStateInitWait) < 0)
		die("backend never reached InitWait");
	f->pool = xbd_gnt_share(f->p, f->bdom, POOL, true, f->refs);
	f->sring = xbd_gnt_share(f->p, f->bdom, 1, true, &f->ring_ref);
	if (!f->pool || !f->sring)
		die("cannot grant pages: %s", strerror(errno));
	xbd_ring_init_shared(f->sring, 1);
	if (xbd_ring_attach(&f->ring, f->sring, 1, XBD_ABI_NATIVE, XBD_RING_FRONT))
		die("ring attach");
	f->port = xbd_evtchn_alloc_unbound(f->ev, f->bdom);
	if (f->port < 0)
		die("alloc_unbound: %s", strerror(-f->port));
	if ((err = xbd_xs_transact(f->xs, keys, f)))
		die("writing the frontend keys: %s", strerror(-err));
	if (wait_backend(f, 1u << XenbusStateConnected) != XenbusStateConnected)
		die("backend did not connect");
	f->sectors = rd(f, "sectors", 0);
	f->max_indirect = rd(f, "feature-max-indirect-segments", 0);
	wr(f, XBT_NULL, "state", XenbusStateConnected);
}

static void fe_close(struct fe *f)
{
	wr(f, XBT_NULL, "state", XenbusStateClosing);
	if (wait_backend(f, 1u << XenbusStateClosing | 1u << XenbusStateClosed) < 0)
		die("backend did not follow to Closing");
	wr(f, XBT_NULL, "state", XenbusStateClosed);
	if (wait_backend(f, 1u << XenbusStateClosed) < 0)
		die("backend did not reach Closed");
}

static void put(struct fe *f, struct xbd_request *r)
{
	r->id = f->next_id++;
	if (xbd_front_put_request(&f->ring, r))
		die("put_request failed");
	if (xbd_front_push(&f->ring))
		xbd_evtchn_notify(f->ev, f->port);
}

static int16_t wait_rsp(struct fe *f, uint64_t id)
{
	uint64_t end = now_ms() + TIMEOUT_MS;
	struct xbd_response rsp[32];
	struct pollfd pfd = { .fd = xbd_evtchn_fd(f->ev), .events = POLLIN };
	int n, i, port;

	for (;;) {
		n = xbd_front_consume(&f->ring, rsp, 32);
		if (n < 0)
			die("response ring corrupt");
		for (i = 0; i < n; i++)
			if (rsp[i].id == id)
				return rsp[i].status;
		if (n || xbd_front_final_check(&f->ring))
			continue;
		if (now_ms() > end)
			die("no response to request %" PRIu64, id);
		if (poll(&pfd, 1, 100) > 0)
			while ((port = xbd_evtchn_pending(f->ev)) >= 0)
				xbd_evtchn_unmask(f->ev, port);
	}
}

static int16_t submit(struct fe *f, struct xbd_request *r)
{
	put(f, r);
	return wait_rsp(f, r->id);
}

static void expect(int16_t got, int16_t want, const char *what)
{
	if (got != want)
		die("%s: status %d, expected %d", what, got, want);
	say("%s: status %d as expected", what, got);
}

static void rw1(struct xbd_request *r, uint8_t op, uint64_t sector, uint32_t ref)
{
	memset(r, 0, sizeof(*r));
	r->operation = op;
	r->sector_number = sector;
	r->nr_segments = 1;
	r->seg[0] = (struct xbd_seg){ ref, 0, 7 };
}

/* Write a pattern at sector, read it back through another page, compare. */
static void write_read(struct fe *f, uint64_t sector)
{
	struct xbd_request r;
	char *a = f->pool, *b = f->pool + XBD_PAGE_SIZE;
	unsigned int i;

	for (i = 0; i < XBD_PAGE_SIZE; i++)
		a[i] = (char)(i * 7 + f->next_id);
	rw1(&r, BLKIF_OP_WRITE, sector, f->refs[0]);
	expect(submit(f, &r), BLKIF_RSP_OKAY, "write");
	memset(b, 0, XBD_PAGE_SIZE);
	rw1(&r, BLKIF_OP_READ, sector, f->refs[1]);
	expect(submit(f, &r), BLKIF_RSP_OKAY, "read");
	if (memcmp(a, b, XBD_PAGE_SIZE))
		die("data read back differs (sector %" PRIu64 ")", sector);
}

static void still_works(struct fe *f)
{
	write_read(f, 64);
}

/* A well-behaved frontend: 32 verified writes across the disk. */
static void sc_rw(struct fe *f)
{
	unsigned int i;

	for (i = 0; i < 32; i++)
		write_read(f, (f->sectors / 8 / 32) * i * 8);
	say("32 pages written and read back across the disk");
}

static void sc_req_prod_backwards(struct fe *f)
{
	struct blkif_sring *s = f->sring;
	int st;

	still_works(f);
	/* Two requests consumed; now claim req_prod went back by two. */
	__atomic_store_n(&s->req_prod, s->req_prod - 2, __ATOMIC_SEQ_CST);
	xbd_evtchn_notify(f->ev, f->port);
	st = wait_backend(f, 1u << XenbusStateClosing | 1u << XenbusStateClosed);
	if (st < 0)
		die("backend did not close after req_prod went backwards");
	say("backend went to %s after req_prod went backwards", xbd_xenbus_state_name(st));
	wr(f, XBT_NULL, "state", XenbusStateClosed);
}

static void sc_revoke_inflight(struct fe *f)
{
	unsigned int i, okay = 0, error = 0, busy = 0, early = 0;

	for (i = 0; i < 300; i++) {
		struct xbd_request r;
		uint32_t ref;
		void *pg = xbd_gnt_share(f->p, f->bdom, 1, true, &ref);
		int16_t st;
		int err;

		if (!pg)
			die("cannot grant: %s", strerror(errno));
		rw1(&r, i & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ, 128 + (i % 16) * 8, ref);
		put(f, &r);
		/* Revoke at once, while the backend may be mapping it. */
		err = xbd_gnt_unshare(f->p, pg, 1);
		if (err && err != -EBUSY)
			die("unshare: %s", strerror(-err));
		if (!err)
			early++;
		else
			busy++;
		st = wait_rsp(f, r.id);
		if (st == BLKIF_RSP_OKAY)
			okay++;
		else if (st == BLKIF_RSP_ERROR)
			error++;
		else
			die("request %u answered with status %d", i, st);
		if (!err && st == BLKIF_RSP_OKAY) {
			/*
			 * Revoked before the response, yet answered OKAY: only
			 * right if the backend had finished with the page.
			 */
		}
		if (err) {
			/* Mapped when we tried: after the response it must be free. */
			err = xbd_gnt_unshare(f->p, pg, 1);
			if (err)
				die("grant still mapped after the response (request %u, status %d): %s", i,
				    st, strerror(-err));
		}
	}
	say("revoke-inflight: %u okay, %u error; revoke before the map %u, refused (busy) %u", okay,
	    error, early, busy);
	still_works(f);
}

/* An indirect read of nseg segments through indirect pages ind[]. */
static int16_t indirect(struct fe *f, unsigned int nseg, const uint32_t *ind, unsigned int nind)
{
	struct xbd_request r;
	unsigned int i;

	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_READ;
	r.indirect = true;
	r.nr_segments = nseg;
	for (i = 0; i < nind; i++)
		r.indirect_grefs[i] = ind[i];
	return submit(f, &r);
}

static struct blkif_request_segment *segs(struct fe *f, unsigned int pg)
{
	return (struct blkif_request_segment *)(f->pool + (size_t)pg * XBD_PAGE_SIZE);
}

static void fill_segs(struct fe *f, unsigned int pg, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		segs(f, pg)[i] = (struct blkif_request_segment){ f->refs[8 + i % 32], 0, 7 };
}

static void sc_indirect_bad_page(struct fe *f)
{
	uint32_t ind[2];

	if (f->max_indirect < 16)
		die("backend offers only %u indirect segments", f->max_indirect);
	fill_segs(f, 60, 16);
	ind[0] = f->refs[60];
	expect(indirect(f, 16, ind, 1), BLKIF_RSP_OKAY, "valid indirect read");
	ind[0] = f->refs[POOL - 1] + 7000;
	expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect page never granted");
	ind[0] = 0x7fffffff;
	expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect page beyond the grant table");
	ind[0] = f->ring_ref;
	expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect page is the ring itself");
	fill_segs(f, 60, 16);
	segs(f, 60)[5].gref = f->refs[POOL - 1] + 9000;
	ind[0] = f->refs[60];
	expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "segment 5 of the indirect page not granted");
	if (f->max_indirect > 512) {
		fill_segs(f, 60, 512);
		ind[1] = f->refs[POOL - 1] + 7001;
		expect(indirect(f, 520, ind, 2), BLKIF_RSP_ERROR, "second indirect page not granted");
	}
	still_works(f);
}

static void sc_indirect_unaligned(struct fe *f)
{
	uint32_t ind[1] = { f->refs[60] };

	fill_segs(f, 60, 16);
	segs(f, 60)[3].first_sect = 6;
	segs(f, 60)[3].last_sect = 2;
	expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect segment first_sect > last_sect");
	fill_segs(f, 60, 16);
	segs(f, 60)[15].last_sect = 8;
	expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect segment last_sect 8");
	fill_segs(f, 60, 16);
	segs(f, 60)[15].last_sect = 255;
	segs(f, 60)[15].first_sect = 255;
	expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect segment sectors 255..255");
	still_works(f);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "persistent", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	static struct fe f;
	const char *sc;
	int c;

	f.devid = 51728;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': f.devid = strtoul(optarg, NULL, 0); break;
		case 'p': f.persistent = atoi(optarg); break;
		default: die("bad option");
		}
	}
	if (optind != argc - 1)
		die("usage: evilfront [--dev DEVID] [--persistent 0|1] SCENARIO");
	sc = argv[optind];
	fe_connect(&f);
	say("connected to %s: %" PRIu64 " sectors", f.bdir, f.sectors);
	if (!strcmp(sc, "req-prod-backwards")) {
		sc_req_prod_backwards(&f);
		say("%s: ok", sc);
		return 0;
	} else if (!strcmp(sc, "rw")) {
		sc_rw(&f);
	} else if (!strcmp(sc, "revoke-inflight")) {
		sc_revoke_inflight(&f);
	} else if (!strcmp(sc, "indirect-bad-page")) {
		sc_indirect_bad_page(&f);
	} else if (!strcmp(sc, "indirect-unaligned")) {
		sc_indirect_unaligned(&f);
	} else {
		die("unknown scenario %s", sc);
	}
	fe_close(&f);
	say("%s: ok", sc);
	return 0;
}
