/*
 * test-dataplane.c: the data path alone, without the daemon: a ring made
 * and started through dataplane.h as the control plane would (struct
 * xbd_disk, struct xbd_ring_params, xbd_ring_here), on a simulated host,
 * with this process as the guest's frontend too (its ring, grants and
 * event channel through the ring library and the platform).  Each case
 * is a request a guest sends and the answer it sees: consume, submit,
 * complete, respond and push, end to end through the ring thread.
 *
 *   disk A (grant copy, flush, indirect descriptors):
 *     a write read back; a flush; an indirect write and read of 16
 *     segments; a read past the end (BLKIF_RSP_ERROR, counted as
 *     beyond-end); a segment with first_sect > last_sect (ERROR); and a
 *     good read after them (the ring goes on)
 *   disk B (mapped grants, barrier mode):
 *     a barrier carrying data, read back; a flush, which barrier mode does
 *     not offer (BLKIF_RSP_EOPNOTSUPP)
 *
 * and, once each ring is stopped, its report: nothing left unanswered,
 * not failed, and the counters by op.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <xen/io/blkif.h>

#include "blkback/datapath/dataplane.h"
#include "blkback/datapath/stats.h"
#include "ring/ring.h"
#include "tests/platform/ptest.h"

#define FRONT_DOMID 1u
#define DISK_BYTES (4u << 20)
#define DATA_PAGES 16u

/* The guest's side of one ring: its shared ring, event channel and data pages. */
struct guest {
	struct xring ring;
	struct xbd_evtchn *evtchn;
	int port;
	uint32_t ring_ref;
	uint8_t *data;           /* DATA_PAGES pages granted to the backend */
	uint32_t data_refs[DATA_PAGES];
	void *ind;               /* one indirect page */
	uint32_t ind_ref;
	uint64_t next_id;
};

/* The backend's side: the disk and its one ring. */
struct back {
	struct xbd_disk disk;
	struct xbd_ring *r;
	char path[96];
};

static struct xbd_platform *front_plat;
static struct xbd_ring_host host;

static void guest_open(struct guest *g)
{
	void *sring = xbd_gnt_share(front_plat, 0, 1, true, &g->ring_ref);
	int err;

	CHECK(sring, "share the ring page: %s", strerror(errno));
	xring_init_shared(sring, 1);
	err = xring_attach(&g->ring, sring, 1, XBD_ABI_NATIVE, XRING_FRONT);
	CHECK(!err, "attach the ring: %s", strerror(-err));
	err = xbd_evtchn_open(front_plat, &g->evtchn);
	CHECK(!err, "event channel: %s", strerror(-err));
	g->port = xbd_evtchn_alloc_unbound(g->evtchn, 0);
	CHECK(g->port >= 0, "unbound port: %s", strerror(-g->port));
	g->data = xbd_gnt_share(front_plat, 0, DATA_PAGES, true, g->data_refs);
	CHECK(g->data, "share the data pages: %s", strerror(errno));
	g->ind = xbd_gnt_share(front_plat, 0, 1, false, &g->ind_ref);
	CHECK(g->ind, "share the indirect page: %s", strerror(errno));
	g->next_id = 100;
}

/* The guest lets go of its event channel (its pages go with the host). */
static void guest_close(struct guest *g)
{
	xbd_evtchn_close(g->evtchn);
}

/*
 * A disk on a file of DISK_BYTES, offering what lim says, with grant
 * copy or mapped grants; and its ring, started as the control plane
 * starts one, on the guest's ring and port.
 */
static void back_open(struct back *b, const char *dir, const char *name, bool copy,
		      const struct xbd_limits *lim, const struct guest *g)
{
	struct xbd_disk *d = &b->disk;
	struct xbd_ring_params p = { .journal_fd = -1, .evtchn_fd = -1, .cpu = -1 };
	struct xbd_back_opts opts;
	const char *target;
	uint64_t size;
	FILE *f;
	int err;

	snprintf(b->path, sizeof(b->path), "%s/%s.img", dir, name);
	f = fopen(b->path, "w");
	CHECK(f && !ftruncate(fileno(f), DISK_BYTES) && !fclose(f), "make %s", b->path);
	/* The daemon's defaults, none of a configuration file. */
	setenv("XBD_BACK_CONFIG", "/dev/null", 1);
	{
		char *argv[] = { (char *)"xbd-back", NULL };

		CHECK(!xbd_back_parse_options(1, argv, &opts), "the default settings");
	}
	d->o = opts.disk;
	xbd_back_free_options(&opts);
	d->o.direct = false; /* whatever file system TMPDIR is on */
	d->o.poll_max_ns = 0;
	d->o.barrier = lim->barrier;
	d->host = &host;
	d->type = "vbd";
	d->domid = FRONT_DOMID;
	d->devid = copy ? 51712 : 51728;
	snprintf(d->name, sizeof(d->name), "vbd/%u/%u", d->domid, d->devid);
	xbd_ratelimit_init(&d->rl);
	xbd_ratelimit_init(&d->crl);
	d->rl.who = d->crl.who = d->name;
	d->eng = xbd_engine_choose(b->path, &d->o, &target);
	CHECK(d->eng, "an engine for %s", b->path);
	err = d->eng->open(target, false, &d->o, &d->store);
	CHECK(!err, "open %s: %s", b->path, strerror(-err));
	err = d->eng->size(d->store, &size);
	CHECK(!err && size == DISK_BYTES, "its size: %s", strerror(-err));
	d->lim = *lim;
	d->lim.nr_sectors = size >> XBD_SECTOR_SHIFT;
	d->abi = XBD_ABI_NATIVE;
	d->nr_rings = 1;
	d->copy = copy;
	b->r = xbd_ring_new(&xbd_ring_here, d, 0);
	CHECK(b->r, "a ring");
	p.nr_pages = 1;
	p.refs[0] = g->ring_ref;
	p.remote_port = (uint32_t)g->port;
	err = xbd_ring_start(b->r, &p);
	CHECK(!err, "start the ring: %s", strerror(-err));
}

/* A guest and a disk served to it, as lim and copy say. */
static void both_open(struct guest *g, struct back *b, const char *dir, const char *name,
		      bool copy, const struct xbd_limits *lim)
{
	memset(g, 0, sizeof(*g));
	memset(b, 0, sizeof(*b));
	guest_open(g);
	back_open(b, dir, name, copy, lim, g);
}

/* Stop the ring as the control plane does, and check what it reports. */
static void back_close(struct back *b, struct xbd_ring_stats *s)
{
	struct xbd_ring_report rep;

	xbd_ring_request_stop(b->r);
	xbd_ring_stop(b->r);
	CHECK(xbd_ring_exited(b->r), "%s: its thread is gone", b->disk.name);
	xbd_ring_report(b->r, &rep);
	CHECK(!rep.failed, "%s: the ring failed", b->disk.name);
	CHECK(!rep.stop_busy, "%s: %u consumed requests unanswered", b->disk.name, rep.stop_busy);
	xbd_stats_snapshot(xbd_ring_stats(b->r), s);
	xbd_ring_free(b->r);
	b->disk.eng->close(b->disk.store);
	unlink(b->path);
}

/* Send one request (its id set here) and wait for its answer: the status. */
static int16_t call(struct guest *g, struct xbd_request *req)
{
	struct xbd_response rsp;
	int err, n = 0;

	req->id = g->next_id++;
	err = xring_front_put_request(&g->ring, req);
	CHECK(!err, "put request %llu: %s", (unsigned long long)req->id, strerror(-err));
	if (xring_front_push(&g->ring))
		xbd_evtchn_notify(g->evtchn, (uint32_t)g->port);
	/* The answer, polled for (the frontend's own notifications are not the point here). */
	for (int tries = 0; tries < 5000 && !n; tries++) {
		n = xring_front_consume(&g->ring, &rsp, 1);
		CHECK(n >= 0, "the backend corrupted the ring: %s", strerror(-n));
		if (!n)
			usleep(1000);
	}
	CHECK(n == 1, "no answer to request %llu (op %u) within 5 s",
	      (unsigned long long)req->id, req->operation);
	CHECK(rsp.id == req->id, "answer for id %llu, not %llu", (unsigned long long)rsp.id,
	      (unsigned long long)req->id);
	return rsp.status;
}

/* A read or write of nsegs whole pages of the guest's data from page first, at sector. */
static void rw(struct xbd_request *req, const struct guest *g, uint8_t op, uint64_t sector,
	       unsigned int first, unsigned int nsegs)
{
	memset(req, 0, sizeof(*req));
	req->operation = op;
	req->sector_number = sector;
	req->nr_segments = (uint16_t)nsegs;
	for (unsigned int k = 0; k < nsegs; k++) {
		req->seg[k].gref = g->data_refs[first + k];
		req->seg[k].first_sect = 0;
		req->seg[k].last_sect = 7;
	}
}

static void fill(struct guest *g, unsigned int first, unsigned int n, uint8_t seed)
{
	for (size_t i = 0; i < (size_t)n * XBD_PAGE_SIZE; i++)
		g->data[(size_t)first * XBD_PAGE_SIZE + i] = (uint8_t)(seed + i * 7 + i / 4096);
}

static bool same(const struct guest *g, unsigned int a, unsigned int b, unsigned int n)
{
	return !memcmp(g->data + (size_t)a * XBD_PAGE_SIZE, g->data + (size_t)b * XBD_PAGE_SIZE,
		       (size_t)n * XBD_PAGE_SIZE);
}

/* Disk A: grant copy, flush, indirect. */
static void disk_a(const char *dir)
{
	struct xbd_limits lim = { .sector_size = 512, .max_indirect_segs = 32, .flush = true };
	struct xbd_request req;
	struct xbd_ring_stats s;
	struct guest g;
	struct back b;
	int16_t st;

	both_open(&g, &b, dir, "a", true, &lim);

	/* A write of two pages, read back into two others. */
	fill(&g, 0, 2, 1);
	rw(&req, &g, BLKIF_OP_WRITE, 8, 0, 2);
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "write: status %d", st);
	rw(&req, &g, BLKIF_OP_READ, 8, 2, 2);
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "read: status %d", st);
	CHECK(same(&g, 0, 2, 2), "the read did not return what was written");

	/* A flush: no segments. */
	memset(&req, 0, sizeof(req));
	req.operation = BLKIF_OP_FLUSH_DISKCACHE;
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "flush: status %d", st);

	/* An indirect write of 8 pages, read back the same way. */
	fill(&g, 0, 8, 9);
	rw(&req, &g, BLKIF_OP_WRITE, 1024, 0, 8);
	req.indirect = true;
	req.indirect_grefs[0] = g.ind_ref;
	CHECK(!xring_front_fill_indirect(&req, &g.ind), "fill the indirect page");
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "indirect write: status %d", st);
	rw(&req, &g, BLKIF_OP_READ, 1024, 8, 8);
	req.indirect = true;
	req.indirect_grefs[0] = g.ind_ref;
	CHECK(!xring_front_fill_indirect(&req, &g.ind), "fill the indirect page");
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "indirect read: status %d", st);
	CHECK(same(&g, 0, 8, 8), "the indirect read did not return what was written");

	/* 16 segments, past the 11 of a direct request. */
	fill(&g, 0, 16, 33);
	rw(&req, &g, BLKIF_OP_WRITE, 2048, 0, 16);
	req.indirect = true;
	req.indirect_grefs[0] = g.ind_ref;
	CHECK(!xring_front_fill_indirect(&req, &g.ind), "fill the indirect page");
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "16-segment indirect write: status %d", st);

	/* Requests that fail validation. */
	rw(&req, &g, BLKIF_OP_READ, (DISK_BYTES >> XBD_SECTOR_SHIFT) - 4, 0, 1);
	CHECK((st = call(&g, &req)) == BLKIF_RSP_ERROR, "a read past the end: status %d", st);
	rw(&req, &g, BLKIF_OP_WRITE, 0, 0, 1);
	req.seg[0].first_sect = 5;
	req.seg[0].last_sect = 2;
	CHECK((st = call(&g, &req)) == BLKIF_RSP_ERROR, "first_sect > last_sect: status %d", st);

	/* The ring goes on: the 16 segments read back. */
	rw(&req, &g, BLKIF_OP_READ, 2048, 0, 11);
	memset(g.data, 0, 11 * XBD_PAGE_SIZE);
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "a read after the refusals: status %d", st);
	{
		struct guest want = g;

		want.data = malloc(16 * XBD_PAGE_SIZE);
		CHECK(want.data, "memory");
		fill(&want, 0, 16, 33);
		CHECK(!memcmp(g.data, want.data, 11 * XBD_PAGE_SIZE),
		      "the 16-segment write did not land where it was sent");
		free(want.data);
	}

	back_close(&b, &s);
	CHECK(s.wr_req == 3 && s.rd_req == 3, "counted %llu writes and %llu reads, not 3 and 3",
	      (unsigned long long)s.wr_req, (unsigned long long)s.rd_req);
	CHECK(s.f_req == 1, "counted %llu flushes, not 1", (unsigned long long)s.f_req);
	CHECK(s.in_flight == 0, "%llu requests counted in flight, every one answered",
	      (unsigned long long)s.in_flight);
	CHECK(s.errors[XBD_REQ_BEYOND_END] == 1 && s.errors[XBD_REQ_BAD_SECTORS] == 1,
	      "refusals counted as %llu beyond-end and %llu bad-sectors, not 1 and 1",
	      (unsigned long long)s.errors[XBD_REQ_BEYOND_END],
	      (unsigned long long)s.errors[XBD_REQ_BAD_SECTORS]);
	CHECK(s.grant_copy_calls > 0 && !s.grant_map_calls, "grant copy: %llu copies, %llu maps",
	      (unsigned long long)s.grant_copy_calls, (unsigned long long)s.grant_map_calls);
	guest_close(&g);
	printf("disk A (grant copy): write, read, flush, indirect 8 and 16 segments, two "
	       "refusals, then a read: all answered as they should be\n");
}

/* Disk B: mapped grants, barrier mode. */
static void disk_b(const char *dir)
{
	struct xbd_limits lim = { .sector_size = 512, .barrier = true };
	struct xbd_request req;
	struct xbd_ring_stats s;
	struct guest g;
	struct back b;
	int16_t st;

	both_open(&g, &b, dir, "b", false, &lim);

	/* A write, then a barrier carrying data behind it: drained, flushed, written. */
	fill(&g, 0, 1, 5);
	rw(&req, &g, BLKIF_OP_WRITE, 16, 0, 1);
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "write: status %d", st);
	fill(&g, 1, 2, 77);
	rw(&req, &g, BLKIF_OP_WRITE_BARRIER, 24, 1, 2);
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "barrier: status %d", st);
	rw(&req, &g, BLKIF_OP_READ, 16, 4, 3);
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "read: status %d", st);
	CHECK(same(&g, 0, 4, 3), "the read did not return the write and the barrier's data");

	/* Barrier mode offers no flush-cache: EOPNOTSUPP, and the ring goes on. */
	memset(&req, 0, sizeof(req));
	req.operation = BLKIF_OP_FLUSH_DISKCACHE;
	CHECK((st = call(&g, &req)) == BLKIF_RSP_EOPNOTSUPP, "a flush in barrier mode: status %d",
	      st);
	rw(&req, &g, BLKIF_OP_READ, 24, 8, 2);
	CHECK((st = call(&g, &req)) == BLKIF_RSP_OKAY, "a read after it: status %d", st);
	CHECK(same(&g, 1, 8, 2), "the barrier's data did not read back");

	back_close(&b, &s);
	CHECK(s.barrier_req == 1 && s.wr_req == 1 && s.rd_req == 2,
	      "counted %llu barriers, %llu writes, %llu reads, not 1, 1 and 2",
	      (unsigned long long)s.barrier_req, (unsigned long long)s.wr_req,
	      (unsigned long long)s.rd_req);
	CHECK(s.errors[XBD_REQ_UNSUPPORTED] == 1, "the flush counted %llu times as unsupported",
	      (unsigned long long)s.errors[XBD_REQ_UNSUPPORTED]);
	CHECK(s.grant_map_calls > 0 && !s.grant_copy_calls, "mapped grants: %llu maps, %llu copies",
	      (unsigned long long)s.grant_map_calls, (unsigned long long)s.grant_copy_calls);
	guest_close(&g);
	printf("disk B (mapped grants, barrier mode): a barrier carrying data, read back; a flush "
	       "refused as EOPNOTSUPP; the ring goes on\n");
}

int main(void)
{
	const char *dir = ptest_host(FRONT_DOMID + 1, 120);
	int err;

	front_plat = ptest_open(FRONT_DOMID);
	err = xbd_platform_open_sim(dir, 0, &host.plat);
	CHECK(!err, "open as dom0: %s", strerror(-err));
	host.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(host.wake_fd >= 0, "eventfd: %s", strerror(errno));
	disk_a(dir);
	disk_b(dir);
	close(host.wake_fd);
	xbd_platform_close(host.plat);
	xbd_platform_close(front_plat);
	return 0;
}
