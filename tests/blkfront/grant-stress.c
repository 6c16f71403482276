/*
 * grant-stress.c: bursts of large writes from several submitting threads
 * at once against a small per-queue grant budget, the load under which
 * libxbdfront's wait list used to strand (the e2e seq1m hang: nbdkit's
 * worker threads submitting 1 MiB writes with indirect=256).
 *
 * Each round every thread submits --depth writes of --bs bytes at the same
 * moment, the main thread runs the event loop until all have completed,
 * and then the library's accounting must be whole again
 * (xbd_front_selfcheck: every pool page back in the pool, nothing left
 * waiting).  A round that does not drain within --timeout seconds fails
 * with the self-check's view of what is stuck.  At the end every block is
 * read back and must hold the last round's data.
 *
 *   grant-stress --vdev xvdb [--threads 4] [--depth 2] [--bs 1048576]
 *                [--rounds 100] [--queues 2] [--indirect 256]
 *                [--max-grants 768] [--persistent 0|1] [--timeout 10]
 *
 * Exit 0 when all rounds drained and the data is right, 1 otherwise.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkfront/xbdfront.h"
#include "common/clock.h"

struct stress {
	struct xbd_front *f;
	unsigned int threads, depth, rounds;
	size_t bs;
	pthread_mutex_t lock;
	pthread_cond_t go;
	unsigned int round;      /* the round threads should submit; 0: none yet */
	bool stop;
	unsigned int completed;  /* writes completed this round */
	unsigned int errors;
};

struct worker {
	struct stress *st;
	unsigned int idx;
	pthread_t tid;
	uint8_t *buf;
};

/* The content of block b written in round r: 64-bit words unique to both. */
static void fill(uint8_t *buf, size_t bs, unsigned int b, unsigned int r)
{
	size_t i;

	for (i = 0; i < bs / 8; i++) {
		uint64_t v = ((uint64_t)b << 40) ^ ((uint64_t)r << 20) ^ i;

		memcpy(buf + i * 8, &v, 8);
	}
}

static void write_done(void *arg, int result)
{
	struct stress *st = arg;

	pthread_mutex_lock(&st->lock);
	st->completed++;
	if (result < 0) {
		st->errors++;
		fprintf(stderr, "grant-stress: write failed: %s\n", strerror(-result));
	}
	pthread_mutex_unlock(&st->lock);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct stress *st = w->st;
	unsigned int seen = 0, k;

	for (;;) {
		pthread_mutex_lock(&st->lock);
		while (!st->stop && st->round == seen)
			pthread_cond_wait(&st->go, &st->lock);
		if (st->stop) {
			pthread_mutex_unlock(&st->lock);
			return NULL;
		}
		seen = st->round;
		pthread_mutex_unlock(&st->lock);
		for (k = 0; k < st->depth; k++) {
			unsigned int b = w->idx * st->depth + k;
			struct xbd_front_req req = {
				.op = XBD_FRONT_WRITE, .queue = -1, .offset = (uint64_t)b * st->bs,
				.len = st->bs, .buf = w->buf, .cb = write_done, .arg = st,
			};
			int rc;

			/* the library copies write data before submit returns */
			fill(w->buf, st->bs, b, seen);
			rc = xbd_front_submit(st->f, &req);
			if (rc < 0) {
				fprintf(stderr, "grant-stress: submit: %s\n", strerror(-rc));
				write_done(st, rc);
			}
		}
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: grant-stress --vdev NAME [--threads N] [--depth N] [--bs BYTES]"
		" [--rounds N] [--queues N] [--indirect N] [--max-grants N] [--persistent 0|1]"
		" [--timeout S]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct stress st = { .threads = 4, .depth = 2, .rounds = 100, .bs = 1u << 20 };
	struct xbd_front_opts opts;
	struct xbd_front_stats stats;
	struct worker *w = NULL;
	char why[256];
	double timeout = 10;
	unsigned int i, r, started = 0;
	uint8_t *want = NULL, *got = NULL;
	int rc, ret = 1;

	xbd_front_opts_init(&opts);
	opts.max_queues = 2;
	opts.indirect_segs = 256;
	opts.timeout_ms = 3000; /* a stuck round must not make close wait long */
	for (i = 1; i < (unsigned int)argc; i++) {
		const char *o = argv[i], *v = i + 1 < (unsigned int)argc ? argv[i + 1] : NULL;

		if (!v)
			return usage();
		i++;
		if (!strcmp(o, "--vdev"))
			opts.vdev = v;
		else if (!strcmp(o, "--threads"))
			st.threads = (unsigned int)strtoul(v, NULL, 0);
		else if (!strcmp(o, "--depth"))
			st.depth = (unsigned int)strtoul(v, NULL, 0);
		else if (!strcmp(o, "--bs"))
			st.bs = strtoul(v, NULL, 0);
		else if (!strcmp(o, "--rounds"))
			st.rounds = (unsigned int)strtoul(v, NULL, 0);
		else if (!strcmp(o, "--queues"))
			opts.max_queues = (unsigned int)strtoul(v, NULL, 0);
		else if (!strcmp(o, "--indirect"))
			opts.indirect_segs = atoi(v);
		else if (!strcmp(o, "--max-grants"))
			opts.max_grants = (unsigned int)strtoul(v, NULL, 0);
		else if (!strcmp(o, "--persistent"))
			opts.persistent = atoi(v);
		else if (!strcmp(o, "--timeout"))
			timeout = strtod(v, NULL);
		else
			return usage();
	}
	if (!opts.vdev || !st.threads || !st.depth || !st.rounds || !st.bs || st.bs % 4096)
		return usage();

	rc = xbd_front_open(&opts, &st.f);
	if (rc < 0) {
		fprintf(stderr, "grant-stress: cannot attach to %s: %s\n", opts.vdev, strerror(-rc));
		return 1;
	}
	{
		struct xbd_front_info in;

		xbd_front_info(st.f, &in);
		if ((uint64_t)st.threads * st.depth * st.bs > in.size) {
			fprintf(stderr, "grant-stress: %u x %u blocks of %zu bytes do not fit the disk\n",
				st.threads, st.depth, st.bs);
			goto out;
		}
		printf("grant-stress: %u queue(s), %u segments per request, persistent %d\n",
		       in.nr_queues, in.max_segs, in.persistent);
	}
	pthread_mutex_init(&st.lock, NULL);
	pthread_cond_init(&st.go, NULL);
	w = calloc(st.threads, sizeof(*w));
	want = malloc(st.bs);
	got = malloc(st.bs);
	if (!w || !want || !got)
		goto out_threads;
	for (i = 0; i < st.threads; i++) {
		w[i].st = &st;
		w[i].idx = i;
		w[i].buf = malloc(st.bs);
		if (!w[i].buf || pthread_create(&w[i].tid, NULL, worker_main, &w[i])) {
			free(w[i].buf);
			goto out_threads;
		}
		started++;
	}

	for (r = 1; r <= st.rounds; r++) {
		unsigned int want_done = st.threads * st.depth, done;
		double end = xbd_mono_s() + timeout;

		pthread_mutex_lock(&st.lock);
		st.completed = 0;
		st.round = r;
		pthread_cond_broadcast(&st.go);
		pthread_mutex_unlock(&st.lock);
		for (;;) {
			pthread_mutex_lock(&st.lock);
			done = st.completed;
			pthread_mutex_unlock(&st.lock);
			if (done == want_done && xbd_front_inflight(st.f) == 0)
				break;
			if (xbd_mono_s() > end) {
				xbd_front_stats(st.f, &stats);
				xbd_front_selfcheck(st.f, why, sizeof(why));
				fprintf(stderr, "grant-stress: round %u stuck: %u of %u writes done after"
					" %.0f s (ring requests %" PRIu64 ", responses %" PRIu64 "); %s\n",
					r, done, want_done, timeout, stats.requests, stats.responses,
					why[0] ? why : "self-check finds nothing");
				goto out_threads;
			}
			rc = xbd_front_run(st.f, 100);
			if (rc < 0) {
				fprintf(stderr, "grant-stress: event loop: %s\n", strerror(-rc));
				goto out_threads;
			}
		}
		if (xbd_front_selfcheck(st.f, why, sizeof(why)) < 0) {
			fprintf(stderr, "grant-stress: after round %u: %s\n", r, why);
			goto out_threads;
		}
	}
	if (st.errors) {
		fprintf(stderr, "grant-stress: %u write(s) failed\n", st.errors);
		goto out_threads;
	}
	for (i = 0; i < st.threads * st.depth; i++) {
		rc = xbd_front_io(st.f, XBD_FRONT_READ, 0, -1, (uint64_t)i * st.bs, st.bs, got);
		fill(want, st.bs, i, st.rounds);
		if (rc < 0 || memcmp(want, got, st.bs)) {
			fprintf(stderr, "grant-stress: block %u: %s\n", i,
				rc < 0 ? strerror(-rc) : "not the last round's data");
			goto out_threads;
		}
	}
	xbd_front_stats(st.f, &stats);
	printf("grant-stress: %u rounds of %u x %u writes of %zu bytes: ok (%" PRIu64
	       " ring requests, %" PRIu64 " grant calls)\n", st.rounds, st.threads, st.depth, st.bs,
	       stats.requests, stats.grants);
	ret = 0;
out_threads:
	pthread_mutex_lock(&st.lock);
	st.stop = true;
	pthread_cond_broadcast(&st.go);
	pthread_mutex_unlock(&st.lock);
	for (i = 0; i < started; i++) {
		pthread_join(w[i].tid, NULL);
		free(w[i].buf);
	}
	free(w);
	free(want);
	free(got);
	pthread_cond_destroy(&st.go);
	pthread_mutex_destroy(&st.lock);
out:
	/* a stuck round leaves requests in flight: close fails them (bounded wait) */
	xbd_front_close(st.f);
	return ret;
}
