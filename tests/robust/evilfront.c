/*
 * evilfront.c: a hostile test frontend for what tests/blkback/rawfront.c
 * does not already do.  It acts as a domU (XBD_SIM_DOMID), connects one
 * single-page ring to the vbd backend DEVID (tests/lib/testfront.c) and
 * runs one scenario of the table at the end of this file (evilfront --help
 * lists them); exit 0 when the backend behaved.  After each scenario
 * except req-prod-backwards a write and read-back must work.
 *
 *   evilfront [--dev DEVID] [--persistent 0|1] SCENARIO
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testfront.h"

/* Guest pages granted for data: few, for churn tests (rawfront uses 1200). */
#define POOL 64

static void rw1(struct xbd_request *r, uint8_t op, uint64_t sector, uint32_t ref)
{
	memset(r, 0, sizeof(*r));
	r->operation = op;
	r->sector_number = sector;
	r->nr_segments = 1;
	r->seg[0] = (struct xbd_seg){ ref, 0, 7 };
}

/* Write a pattern at sector, read it back through another page, compare. */
static void write_read(struct tf *f, uint64_t sector)
{
	struct xbd_request r;
	char *a = tf_page(f, 0), *b = tf_page(f, 1);
	unsigned int i;

	for (i = 0; i < XBD_PAGE_SIZE; i++)
		a[i] = (char)(i * 7 + f->next_id);
	rw1(&r, BLKIF_OP_WRITE, sector, f->pool_refs[0]);
	tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_OKAY, "write");
	memset(b, 0, XBD_PAGE_SIZE);
	rw1(&r, BLKIF_OP_READ, sector, f->pool_refs[1]);
	tf_expect(tf_submit(f, 0, &r), BLKIF_RSP_OKAY, "read");
	if (memcmp(a, b, XBD_PAGE_SIZE))
		tf_die("data read back differs (sector %" PRIu64 ")", sector);
}

static void still_works(struct tf *f)
{
	write_read(f, 64);
}

/* A well-behaved frontend: 32 verified writes across the disk. */
static void sc_rw(struct tf *f)
{
	unsigned int i;

	for (i = 0; i < 32; i++)
		write_read(f, (f->sectors / 8 / 32) * i * 8);
	tf_say("32 pages written and read back across the disk");
}

static void sc_req_prod_backwards(struct tf *f)
{
	struct blkif_sring *s = f->q[0].sring;
	int st;

	still_works(f);
	/* Two requests consumed; now claim req_prod went back by two. */
	__atomic_store_n(&s->req_prod, s->req_prod - 2, __ATOMIC_SEQ_CST);
	xbd_evtchn_notify(f->ev, f->q[0].port);
	st = tf_wait_backend(f, 1u << XenbusStateClosing | 1u << XenbusStateClosed, TF_TIMEOUT_MS);
	if (st < 0)
		tf_die("backend did not close after req_prod went backwards");
	tf_say("backend went to %s after req_prod went backwards", xbd_xenbus_state_name(st));
	tf_write_uint(f, XBT_NULL, f->fdir, "state", XenbusStateClosed);
}

static void sc_revoke_inflight(struct tf *f)
{
	unsigned int i, okay = 0, error = 0, busy = 0, early = 0;

	for (i = 0; i < 300; i++) {
		struct xbd_request r;
		uint32_t ref;
		void *pg = xbd_gnt_share(f->p, f->bdom, 1, true, &ref);
		int16_t st;
		int err;

		if (!pg)
			tf_die("cannot grant: %s", strerror(errno));
		rw1(&r, i & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ, 128 + (i % 16) * 8, ref);
		tf_put(f, 0, &r);
		/* Revoke at once, while the backend may be mapping it. */
		err = xbd_gnt_unshare(f->p, pg, 1);
		if (err && err != -EBUSY)
			tf_die("unshare: %s", strerror(-err));
		if (!err)
			early++;
		else
			busy++;
		st = tf_wait_rsp(f, 0, r.id);
		if (st == BLKIF_RSP_OKAY)
			okay++;
		else if (st == BLKIF_RSP_ERROR)
			error++;
		else
			tf_die("request %u answered with status %d", i, st);
		/*
		 * Revoked before the response yet answered OKAY is right only if
		 * the backend had finished with the page.  Mapped when we tried:
		 * after the response it must be free.
		 */
		if (err) {
			err = xbd_gnt_unshare(f->p, pg, 1);
			if (err)
				tf_die("grant still mapped after the response (request %u, status %d): %s",
				       i, st, strerror(-err));
		}
	}
	tf_say("revoke-inflight: %u okay, %u error; revoke before the map %u, refused (busy) %u",
	       okay, error, early, busy);
	still_works(f);
}

/* An indirect read of nseg segments through indirect pages ind[]. */
static int16_t indirect(struct tf *f, unsigned int nseg, const uint32_t *ind, unsigned int nind)
{
	struct xbd_request r;
	unsigned int i;

	memset(&r, 0, sizeof(r));
	r.operation = BLKIF_OP_READ;
	r.indirect = true;
	r.nr_segments = nseg;
	for (i = 0; i < nind; i++)
		r.indirect_grefs[i] = ind[i];
	return tf_submit(f, 0, &r);
}

static struct blkif_request_segment *segs(struct tf *f, unsigned int pg)
{
	return (struct blkif_request_segment *)tf_page(f, pg);
}

static void fill_segs(struct tf *f, unsigned int pg, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		segs(f, pg)[i] = (struct blkif_request_segment){ f->pool_refs[8 + i % 32], 0, 7 };
}

static void sc_indirect_bad_page(struct tf *f)
{
	uint32_t ind[2];

	if (f->max_indirect < 16)
		tf_die("backend offers only %u indirect segments", f->max_indirect);
	fill_segs(f, 60, 16);
	ind[0] = f->pool_refs[60];
	tf_expect(indirect(f, 16, ind, 1), BLKIF_RSP_OKAY, "valid indirect read");
	ind[0] = f->pool_refs[POOL - 1] + 7000;
	tf_expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect page never granted");
	ind[0] = 0x7fffffff;
	tf_expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect page beyond the grant table");
	ind[0] = f->q[0].refs[0];
	tf_expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect page is the ring itself");
	fill_segs(f, 60, 16);
	segs(f, 60)[5].gref = f->pool_refs[POOL - 1] + 9000;
	ind[0] = f->pool_refs[60];
	tf_expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR,
		  "segment 5 of the indirect page not granted");
	if (f->max_indirect > 512) {
		fill_segs(f, 60, 512);
		ind[1] = f->pool_refs[POOL - 1] + 7001;
		tf_expect(indirect(f, 520, ind, 2), BLKIF_RSP_ERROR, "second indirect page not granted");
	}
	still_works(f);
}

static void sc_indirect_unaligned(struct tf *f)
{
	uint32_t ind[1] = { f->pool_refs[60] };

	fill_segs(f, 60, 16);
	segs(f, 60)[3].first_sect = 6;
	segs(f, 60)[3].last_sect = 2;
	tf_expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect segment first_sect > last_sect");
	fill_segs(f, 60, 16);
	segs(f, 60)[15].last_sect = 8;
	tf_expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect segment last_sect 8");
	fill_segs(f, 60, 16);
	segs(f, 60)[15].last_sect = 255;
	segs(f, 60)[15].first_sect = 255;
	tf_expect(indirect(f, 16, ind, 1), BLKIF_RSP_ERROR, "indirect segment sectors 255..255");
	still_works(f);
}

static const struct tf_scenario scenarios[] = {
	{ "req-prod-backwards", sc_req_prod_backwards,
	  "after a valid request, move req_prod back below req_cons: the backend must "
	  "disconnect (Closing)", true },
	{ "revoke-inflight", sc_revoke_inflight,
	  "grant a page, submit a read or write with it and revoke the grant at once, "
	  "300 times: each is answered OKAY (mapped first; the revoke fails with EBUSY, "
	  "as in Xen) or ERROR (the map failed), and the page can always be revoked once "
	  "the response is in", false },
	{ "indirect-bad-page", sc_indirect_bad_page,
	  "indirect requests whose indirect page is not granted, beyond the grant table, "
	  "the ring itself, or whose second page is missing; a segment inside naming a "
	  "bad grant: ERROR each", false },
	{ "indirect-unaligned", sc_indirect_unaligned,
	  "segments inside an indirect page with first_sect > last_sect or last_sect 8: "
	  "ERROR each", false },
	{ "rw", sc_rw,
	  "well-behaved: 32 verified page writes (64 guest pages where rawfront uses 1200, "
	  "for churn tests)", false },
	{ NULL },
};

static const struct tf_program program = {
	.name = "evilfront",
	.scenarios = scenarios,
	.options =
		"  --dev DEVID           the vbd (51728, xvdb)\n"
		"  --persistent 0|1      feature-persistent (0)\n",
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "persistent", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct tf f;
	int c;

	tf_init(&f, &program, POOL);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': f.devid = strtoul(optarg, NULL, 0); break;
		case 'p': f.persistent = atoi(optarg); break;
		case 'h': tf_usage(&program, 0);
		default: tf_usage(&program, 1);
		}
	}
	return tf_main(&f, argc, argv);
}
