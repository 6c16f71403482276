/*
 * testback.c: a deliberately small blkif backend for the blkfront tests.
 * It serves one vbd from memory (single queue, no persistent grants, no
 * indirect) and can misbehave on purpose, so that the tests can show that
 * libxbdfront trusts nothing a backend writes:
 *
 *   testback BACKEND-PATH [--evil MODE] [--after N]
 *     MODE: bad-id    answer with an id never sent
 *           dup-id    answer one request twice
 *           bad-op    answer with another operation
 *           rsp-prod  publish a response producer past the requests
 *           eopnotsupp  answer flush and discard with EOPNOTSUPP (not hostile:
 *                     xbd-front must drop the feature and go on)
 *     N: behave for the first N requests (default 4), then misbehave.
 *   testback BACKEND-PATH --sector-size N   offer a logical block size of N
 *   testback BACKEND-PATH --indirect N      offer N indirect segments
 *   --drop-features: come back from a restart without indirect and flush
 *   testback BACKEND-PATH --restart-after N | --close-after N
 *     after N requests, drop the requests still unanswered and either
 *     restart (unmap, back to InitWait, as a restarted daemon does) or go
 *     Closing -> Closed and offer a new connection once the frontend asks
 *     (Initialising): xbd-front must reconnect and resubmit what was lost.
 *
 * Acts as dom0 through the platform interface (xbd-sim env ... 0).  Runs
 * until the frontend closes (and does not ask for a new connection within
 * half a second), or 30 s without a frontend.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "platform/platform.h"
#include "ring/ring.h"
#include "xenstore/xenbus.h"

#define DISK_SECTORS 8192u /* 4 MiB */

struct tb {
	struct xbd_platform *p;
	struct xbd_xs *xs;
	struct xbd_evtchn *evt;
	const char *be;
	char fe[XBD_XS_PATH_MAX];
	uint32_t fe_domid;
	const char *evil;
	unsigned int after, served;
	unsigned int restart_after, close_after; /* 0: never */
	unsigned int sector_size;
	unsigned int indirect;  /* feature-max-indirect-segments offered */
	bool drop_features;
	bool flush;
	bool bounce;         /* the threshold was hit: reconnect now */
	unsigned int dropped;
	uint8_t *disk;
	struct xring ring;
	void *sring;
	unsigned int nr_pages;
	int port;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "testback: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static uint64_t rd(struct tb *t, const char *dir, const char *key, uint64_t def)
{
	char p[XBD_XS_PATH_MAX];
	uint64_t v;

	xbd_xs_pathf(p, sizeof(p), "%s/%s", dir, key);
	return xbd_xs_read_uint(t->xs, XBT_NULL, p, 0, UINT64_MAX, &v) < 0 ? def : v;
}

static void wr(struct tb *t, const char *key, uint64_t v)
{
	char p[XBD_XS_PATH_MAX];
	int rc;

	xbd_xs_pathf(p, sizeof(p), "%s/%s", t->be, key);
	if ((rc = xbd_xs_write_uint(t->xs, XBT_NULL, p, v)) < 0)
		die(p, rc);
}

static bool is(const struct tb *t, const char *mode)
{
	return t->evil && !strcmp(t->evil, mode) && t->served >= t->after;
}

/* Serve one validated request; returns its status. */
static int16_t serve(struct tb *t, struct xbd_request *r)
{
	const struct xbd_limits lim = {
		.nr_sectors = DISK_SECTORS, .sector_size = t->sector_size, .flush = t->flush,
		.discard = true, .max_indirect_segs = t->indirect,
	};
	uint32_t refs[XBD_MAX_SEGS];
	uint8_t *m;
	uint64_t sec = r->sector_number;
	unsigned int i;
	enum xbd_req_error e = xbd_req_check_indirect(r, &lim);

	if (e == XBD_REQ_OK && r->indirect) {
		const void *pages[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
		uint8_t *ind = xbd_gnt_map(t->p, t->fe_domid, r->nr_indirect_pages,
					   r->indirect_grefs, false, NULL);

		if (!ind)
			return BLKIF_RSP_ERROR;
		for (i = 0; i < r->nr_indirect_pages; i++)
			pages[i] = ind + (size_t)i * XBD_PAGE_SIZE;
		xbd_req_load_indirect(r, pages);
		xbd_gnt_unmap(t->p, ind, r->nr_indirect_pages);
	}
	if (e == XBD_REQ_OK)
		e = xbd_req_validate(r, &lim);

	if (e != XBD_REQ_OK)
		return xbd_req_error_status(e);
	if (is(t, "eopnotsupp") &&
	    (r->operation == BLKIF_OP_FLUSH_DISKCACHE || r->operation == BLKIF_OP_DISCARD))
		return BLKIF_RSP_EOPNOTSUPP;
	if (r->operation == BLKIF_OP_FLUSH_DISKCACHE)
		return BLKIF_RSP_OKAY;
	if (r->operation == BLKIF_OP_DISCARD) {
		memset(t->disk + sec * 512, 0, r->nr_sectors * 512);
		return BLKIF_RSP_OKAY;
	}
	for (i = 0; i < r->nr_segments; i++)
		refs[i] = r->seg[i].gref;
	m = xbd_gnt_map(t->p, t->fe_domid, r->nr_segments, refs,
			r->operation == BLKIF_OP_READ, NULL);
	if (!m)
		return BLKIF_RSP_ERROR;
	for (i = 0; i < r->nr_segments; i++) {
		size_t n = (size_t)(r->seg[i].last_sect - r->seg[i].first_sect + 1) * 512;
		uint8_t *g = m + (size_t)i * XBD_PAGE_SIZE + r->seg[i].first_sect * 512;

		if (r->operation == BLKIF_OP_READ)
			memcpy(g, t->disk + sec * 512, n);
		else
			memcpy(t->disk + sec * 512, g, n);
		sec += n / 512;
	}
	xbd_gnt_unmap(t->p, m, r->nr_segments);
	return BLKIF_RSP_OKAY;
}

static void connect_ring(struct tb *t)
{
	char p[XBD_XS_PATH_MAX], *proto = NULL;
	uint32_t refs[XBD_RING_MAX_PAGES];
	unsigned int order, i;
	enum xbd_abi abi = XBD_ABI_NATIVE;
	int rc;

	order = (unsigned int)rd(t, t->fe, "ring-page-order", 0);
	if (order > 2)
		die("ring-page-order above what we offered", EINVAL);
	t->nr_pages = 1u << order;
	for (i = 0; i < t->nr_pages; i++) {
		char k[24];

		if (order)
			snprintf(k, sizeof(k), "ring-ref%u", i);
		else
			snprintf(k, sizeof(k), "ring-ref");
		refs[i] = (uint32_t)rd(t, t->fe, k, UINT32_MAX);
	}
	xbd_xs_pathf(p, sizeof(p), "%s/protocol", t->fe);
	if (xbd_xs_read_str(t->xs, XBT_NULL, p, &proto) == 0) {
		if (xbd_abi_from_protocol(proto, &abi) < 0)
			die("protocol", EINVAL);
		free(proto);
	}
	t->sring = xbd_gnt_map(t->p, t->fe_domid, t->nr_pages, refs, true, NULL);
	if (!t->sring)
		die("map ring", errno);
	if ((rc = xring_attach(&t->ring, t->sring, t->nr_pages, abi, XRING_BACK)) < 0)
		die("attach ring", rc);
	t->port = xbd_evtchn_bind_interdomain(t->evt, t->fe_domid,
					      (uint32_t)rd(t, t->fe, "event-channel", 0));
	if (t->port < 0)
		die("bind event channel", t->port);
	wr(t, "sectors", DISK_SECTORS);
	wr(t, "info", 0);
	wr(t, "sector-size", t->sector_size);
	wr(t, "physical-sector-size", t->sector_size);
	wr(t, "state", XenbusStateConnected);
}

static void disconnect_ring(struct tb *t)
{
	if (t->port >= 0)
		xbd_evtchn_unbind(t->evt, (uint32_t)t->port);
	if (t->sring)
		xbd_gnt_unmap(t->p, t->sring, t->nr_pages);
	t->port = -1;
	t->sring = NULL;
}

/* Requests in, responses out; the evil modes bend the responses. */
static void serve_ring(struct tb *t)
{
	static struct xbd_request reqs[8];
	int n, i, port;

	while ((port = xbd_evtchn_pending(t->evt)) >= 0)
		xbd_evtchn_unmask(t->evt, (uint32_t)port);
	do {
		n = xring_back_consume(&t->ring, reqs, 8);
		if (n < 0)
			die("consume", n);
		for (i = 0; i < n; i++) {
			int16_t st;
			uint64_t id = reqs[i].id;
			uint8_t op = reqs[i].raw_operation;

			if (t->bounce ||
			    (t->restart_after && t->served == t->restart_after) ||
			    (t->close_after && t->served == t->close_after)) {
				/* gone before answering: the frontend must send these again */
				t->bounce = true;
				t->dropped++;
				continue;
			}
			st = serve(t, &reqs[i]);

			if (is(t, "bad-id"))
				id += 1000;
			if (is(t, "bad-op"))
				op = op == BLKIF_OP_READ ? BLKIF_OP_WRITE : BLKIF_OP_READ;
			xring_back_put_response(&t->ring, id, op, st);
			if (is(t, "dup-id"))
				xring_back_put_response(&t->ring, id, op, st);
			if (is(t, "rsp-prod")) {
				/* publish responses for requests never pushed */
				xring_back_push(&t->ring);
				__atomic_store_n((uint32_t *)((uint8_t *)t->sring + 8),
						 t->ring.rsp_prod_pvt + 100, __ATOMIC_RELEASE);
				xbd_evtchn_notify(t->evt, (uint32_t)t->port);
				return;
			}
			t->served++;
		}
		if (xring_back_push(&t->ring))
			xbd_evtchn_notify(t->evt, (uint32_t)t->port);
	} while (!t->bounce && (n > 0 || xring_back_final_check(&t->ring)));
}

/* Wait until the frontend's state is one of mask (bits), up to 10 s. */
static void wait_fe(struct tb *t, unsigned int mask)
{
	enum xenbus_state st;
	int rc = xbd_xenbus_wait_state(t->xs, t->fe, mask, 10000, &st);

	if (rc < 0)
		die("waiting for the frontend", rc);
}

/* The frontend lost its backend: restart (InitWait) or Closing/Closed first. */
static void bounce(struct tb *t)
{
	fprintf(stderr, "testback: %s after %u requests, %u dropped\n",
		t->restart_after ? "restarting" : "closing", t->served, t->dropped);
	if (t->close_after) {
		wr(t, "state", XenbusStateClosing);
		wait_fe(t, 1u << XenbusStateClosed);
		disconnect_ring(t);
		wr(t, "state", XenbusStateClosed);
		wait_fe(t, 1u << XenbusStateInitialising);
	} else {
		disconnect_ring(t);
	}
	t->restart_after = t->close_after = 0;
	t->bounce = false;
	if (t->drop_features) {
		t->indirect = 0;
		t->flush = false;
		wr(t, "feature-max-indirect-segments", 0);
		wr(t, "feature-flush-cache", 0);
	}
	wr(t, "state", XenbusStateInitWait);
	wait_fe(t, 1u << XenbusStateInitialised);
}

int main(int argc, char **argv)
{
	struct tb t = { .after = 4, .port = -1, .sector_size = 512, .flush = true };
	char p[XBD_XS_PATH_MAX], *fe = NULL;
	time_t start = time(NULL);
	int i, rc;

	if (argc < 2) {
		fprintf(stderr, "usage: testback BACKEND-PATH [--evil MODE] [--after N]\n");
		return 2;
	}
	t.be = argv[1];
	for (i = 2; i < argc; i += 2) {
		if (!strcmp(argv[i], "--drop-features")) {
			t.drop_features = true;
			i--;
			continue;
		}
		if (i + 1 >= argc)
			break;
		if (!strcmp(argv[i], "--evil"))
			t.evil = argv[i + 1];
		else if (!strcmp(argv[i], "--after"))
			t.after = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--restart-after"))
			t.restart_after = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--indirect"))
			t.indirect = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--sector-size"))
			t.sector_size = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--close-after"))
			t.close_after = (unsigned int)atoi(argv[i + 1]);
	}
	t.disk = calloc(DISK_SECTORS, 512);
	if (!t.disk)
		die("calloc", ENOMEM);
	if ((rc = xbd_platform_open(XBD_PLATFORM_AUTO, &t.p)) < 0)
		die("platform", rc);
	if ((rc = xbd_xs_open(&t.xs)) < 0)
		die("xenstore", rc);
	if ((rc = xbd_evtchn_open(t.p, &t.evt)) < 0)
		die("event channel", rc);
	xbd_xs_pathf(p, sizeof(p), "%s/frontend", t.be);
	if ((rc = xbd_xs_read_str(t.xs, XBT_NULL, p, &fe)) < 0)
		die(p, rc);
	snprintf(t.fe, sizeof(t.fe), "%s", fe);
	free(fe);
	t.fe_domid = (uint32_t)rd(&t, t.be, "frontend-id", 0);

	wr(&t, "feature-flush-cache", 1);
	wr(&t, "feature-barrier", 0);
	wr(&t, "feature-discard", 1);
	wr(&t, "discard-granularity", t.sector_size);
	wr(&t, "discard-alignment", 0);
	wr(&t, "feature-persistent", 0);
	wr(&t, "feature-max-indirect-segments", t.indirect);
	wr(&t, "max-ring-page-order", 2);
	wr(&t, "state", XenbusStateInitWait);

	for (;;) {
		enum xenbus_state fs = xbd_xenbus_read_state(t.xs, t.fe);
		struct pollfd pfd = { .fd = xbd_evtchn_fd(t.evt), .events = POLLIN };

		if (!t.sring && fs == XenbusStateInitialised)
			connect_ring(&t);
		if (t.sring && (fs == XenbusStateClosing || fs == XenbusStateClosed ||
				fs == XenbusStateUnknown)) {
			enum xenbus_state st;

			/* answer what is on the ring first, as a backend must before unmapping */
			serve_ring(&t);
			disconnect_ring(&t);
			wr(&t, "state", XenbusStateClosed);
			/* a frontend that asks again (Initialising) gets a new connection */
			if (fs == XenbusStateUnknown ||
			    xbd_xenbus_wait_state(t.xs, t.fe, 1u << XenbusStateInitialising, 500, &st) < 0)
				break;
			wr(&t, "state", XenbusStateInitWait);
			start = time(NULL);
			continue;
		}
		if (!t.sring && time(NULL) - start > 30)
			break;
		poll(&pfd, 1, 20);
		if (t.sring)
			serve_ring(&t);
		if (t.bounce)
			bounce(&t);
	}
	xbd_evtchn_close(t.evt);
	xbd_xs_close(t.xs);
	xbd_platform_close(t.p);
	free(t.disk);
	return 0;
}
