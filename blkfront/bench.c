/*
 * bench.c: `xbd-front bench`, a load generator straight through
 * libxbdfront (no NBD in between): fio-like rw modes, block size, queue
 * depth per queue, number of queues, runtime and an optional verify that
 * checks every read against the last write of that block.  Reports IOPS,
 * bandwidth, latency percentiles and CPU time as text or JSON.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "blkfront/cli.h"
#include "common/clock.h"
#include "common/size.h"

enum rw_mode { RW_READ, RW_WRITE, RW_RANDREAD, RW_RANDWRITE, RW_RANDRW };
static const char *const rw_names[] = { "read", "write", "randread", "randwrite", "randrw" };

struct bench;

struct slot {
	struct bench *b;
	unsigned int queue;
	uint8_t *buf;
	uint64_t block;
	bool write;
	bool inflight;
	uint32_t seq;
	uint64_t start_ns;
};

struct bench {
	struct xbd_front *f;
	enum rw_mode rw;
	uint64_t bs, nblocks, next_seq_block, rng;
	unsigned int iodepth, nr_queues, rwmix_read;
	bool verify, stopping, fua;
	uint64_t end_ns;
	/* verify: sequence number of the last completed write per block; busy while in flight */
	uint32_t *written;
	uint8_t *busy;
	uint32_t write_seq;
	uint64_t reads, writes, errors, verify_errors, bytes_read, bytes_written;
	uint64_t double_completions;
	uint64_t *lat;
	size_t nr_lat, cap_lat;
	int first_error;
};

static uint64_t rnd(struct bench *b)
{
	/* xorshift64*: cheap and good enough to spread offsets */
	b->rng ^= b->rng >> 12;
	b->rng ^= b->rng << 25;
	b->rng ^= b->rng >> 27;
	return b->rng * 2685821657736338717ull;
}

/* The pattern of write seq to block: every 8 bytes say block, seq and position. */
static void fill(uint8_t *buf, uint64_t bs, uint64_t block, uint32_t seq)
{
	uint64_t i;

	for (i = 0; i + 8 <= bs; i += 8) {
		uint64_t v = (block << 32) ^ ((uint64_t)seq << 16) ^ (i >> 3) ^ 0x5a5a000000000000ull;

		memcpy(buf + i, &v, 8);
	}
}

static void submit_one(struct slot *s);

static void record_lat(struct bench *b, uint64_t ns)
{
	if (b->nr_lat == b->cap_lat) {
		size_t cap = b->cap_lat ? b->cap_lat * 2 : 65536;
		uint64_t *n = realloc(b->lat, cap * sizeof(*n));

		if (!n)
			return;
		b->lat = n;
		b->cap_lat = cap;
	}
	b->lat[b->nr_lat++] = ns;
}

static void done(void *arg, int result)
{
	struct slot *s = arg;
	struct bench *b = s->b;

	if (!s->inflight) {
		/* the library promises one completion per request */
		b->double_completions++;
		b->errors++;
		return;
	}
	s->inflight = false;
	record_lat(b, xbd_mono_ns() - s->start_ns);
	if (result < 0) {
		b->errors++;
		if (!b->first_error)
			b->first_error = result;
	} else if (s->write) {
		b->writes++;
		b->bytes_written += b->bs;
		if (b->verify)
			b->written[s->block] = s->seq;
	} else {
		b->reads++;
		b->bytes_read += b->bs;
		if (b->verify && b->written[s->block]) {
			uint8_t *want = malloc(b->bs);

			if (want) {
				fill(want, b->bs, s->block, b->written[s->block]);
				if (memcmp(want, s->buf, b->bs)) {
					if (!b->verify_errors)
						fprintf(stderr, "xbd-front bench: verify failed at offset %" PRIu64 "\n",
							s->block * b->bs);
					b->verify_errors++;
				}
				free(want);
			}
		}
	}
	if (b->verify)
		b->busy[s->block] = 0;
	if (xbd_mono_ns() >= b->end_ns || b->errors)
		b->stopping = true;
	if (!b->stopping)
		submit_one(s);
}

static void submit_one(struct slot *s)
{
	struct bench *b = s->b;
	struct xbd_front_req req;
	int tries, rc;

	switch (b->rw) {
	case RW_READ:
	case RW_WRITE:
		s->block = b->next_seq_block++ % b->nblocks;
		break;
	default:
		s->block = rnd(b) % b->nblocks;
		break;
	}
	/* verify: never two requests on one block at once, so the last write is known */
	for (tries = 0; b->verify && b->busy[s->block] && tries < 64; tries++)
		s->block = (s->block + 1) % b->nblocks;
	if (b->verify && b->busy[s->block]) {
		b->stopping = true;
		return;
	}
	s->write = b->rw == RW_WRITE || b->rw == RW_RANDWRITE ||
		   (b->rw == RW_RANDRW && rnd(b) % 100 >= b->rwmix_read);
	if (s->write && b->verify) {
		s->seq = ++b->write_seq;
		fill(s->buf, b->bs, s->block, s->seq);
	}
	memset(&req, 0, sizeof(req));
	req.op = s->write ? XBD_FRONT_WRITE : XBD_FRONT_READ;
	req.flags = s->write && b->fua ? XBD_FRONT_FUA : 0;
	req.queue = (int)s->queue;
	req.offset = s->block * b->bs;
	req.len = b->bs;
	req.buf = s->buf;
	req.cb = done;
	req.arg = s;
	s->start_ns = xbd_mono_ns();
	if (b->verify)
		b->busy[s->block] = 1;
	s->inflight = true;
	rc = xbd_front_submit(b->f, &req);
	if (rc < 0) {
		s->inflight = false;
		b->errors++;
		if (!b->first_error)
			b->first_error = rc;
		b->stopping = true;
		if (b->verify)
			b->busy[s->block] = 0;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(const struct bench *b, double p)
{
	size_t i;

	if (!b->nr_lat)
		return 0;
	i = (size_t)(p / 100.0 * (double)(b->nr_lat - 1) + 0.5);
	return (double)b->lat[i] / 1000.0;
}

static void bench_usage(FILE *out)
{
	fprintf(out,
		"usage: xbd-front bench [device options] [--rw MODE] [--bs BYTES] [--iodepth N]\n"
		"                       [--runtime S] [--size BYTES] [--rwmixread PCT] [--verify]\n"
		"                       [--fua] [--json]\n"
		"  --rw        read, write, randread (default), randwrite, randrw\n"
		"  --bs        block size in bytes (default 4096; K, M, G, T: powers of 1024)\n"
		"  --iodepth   requests in flight per queue (default 16)\n"
		"  --runtime   seconds (default 5; may be fractional)\n"
		"  --size      bytes of the disk to use (default: all; K, M, G, T as for --bs)\n"
		"  --verify    check every read against the last write of its block\n"
		"  --fua       every write is a FUA write (durable on completion: write + flush\n"
		"              with feature-flush-cache, WRITE_BARRIER with feature-barrier)\n"
		"  --json      print the result as JSON\n");
	cli_device_usage(out);
}

/* What a run measured, besides the counters in struct bench. */
struct result {
	double secs, cpu;        /* its length, and the CPU this process took */
	bool stuck;              /* requests still in flight 30 s after the end */
	struct xbd_front_stats st;
};

/*
 * bench's options into b and opts (--runtime, --size, --json apart): -1
 * to go on, else the exit status (--help: 0, a bad option: 2, said).
 */
static int bench_args(int argc, char **argv, struct bench *b, struct xbd_front_opts *opts,
		      double *runtime, uint64_t *size, bool *json)
{
	unsigned int i;
	int rc, k;

	for (k = 1; k < argc; k++) {
		const char *o = argv[k];

		rc = cli_device_option(argc, argv, &k, opts);
		if (rc < 0)
			return 2;
		if (rc > 0)
			continue;
		if (!strcmp(o, "--help")) {
			bench_usage(stdout);
			return 0;
		} else if (!strcmp(o, "--verify")) {
			b->verify = true;
		} else if (!strcmp(o, "--json")) {
			*json = true;
		} else if (!strcmp(o, "--fua")) {
			b->fua = true;
		} else if (k + 1 < argc && !strcmp(o, "--rw")) {
			for (i = 0; i < 5 && strcmp(argv[k + 1], rw_names[i]); i++)
				;
			if (i == 5)
				goto bad;
			b->rw = (enum rw_mode)i;
			k++;
		} else if (k + 1 < argc && !strcmp(o, "--bs")) {
			if (xbd_parse_size(argv[++k], &b->bs) < 0 || b->bs == 0 || b->bs > (64u << 20))
				goto bad;
		} else if (k + 1 < argc && !strcmp(o, "--iodepth")) {
			b->iodepth = (unsigned int)strtoul(argv[++k], NULL, 10);
			if (b->iodepth == 0 || b->iodepth > 1024)
				goto bad;
		} else if (k + 1 < argc && !strcmp(o, "--runtime")) {
			*runtime = strtod(argv[++k], NULL);
			if (!(*runtime > 0))
				goto bad;
		} else if (k + 1 < argc && !strcmp(o, "--size")) {
			if (xbd_parse_size(argv[++k], size) < 0)
				goto bad;
		} else if (k + 1 < argc && !strcmp(o, "--rwmixread")) {
			b->rwmix_read = (unsigned int)strtoul(argv[++k], NULL, 10);
			if (b->rwmix_read > 100)
				goto bad;
		} else {
			goto bad;
		}
	}
	return -1;
bad:
	fprintf(stderr, "xbd-front bench: bad option %s\n", argv[k]);
	bench_usage(stderr);
	return 2;
}

/*
 * The disk as the run needs it (blocks of bs, writable for a write run)
 * and the memory it runs in: a slot per request in flight (*slots, *n),
 * the verify maps.  0, or -1 (said why, unless out of memory).
 */
static int bench_prepare(struct bench *b, const struct xbd_front_info *in, uint64_t size,
			 const struct xbd_front_opts *opts, struct slot **slots, unsigned int *n)
{
	if (b->bs % in->sector_size) {
		fprintf(stderr, "xbd-front bench: --bs %" PRIu64 " is not a multiple of the sector size %u\n",
			b->bs, in->sector_size);
		return -1;
	}
	if (!size || size > in->size)
		size = in->size;
	b->nblocks = size / b->bs;
	if (b->nblocks == 0) {
		fprintf(stderr, "xbd-front bench: disk smaller than one block\n");
		return -1;
	}
	if (in->readonly && b->rw != RW_READ && b->rw != RW_RANDREAD) {
		fprintf(stderr, "xbd-front bench: %s: read-only disk\n", cli_devname(opts));
		return -1;
	}
	if (b->verify) {
		b->written = calloc(b->nblocks, sizeof(*b->written));
		b->busy = calloc(b->nblocks, 1);
		if (!b->written || !b->busy)
			return -1;
	}
	b->nr_queues = in->nr_queues;
	*n = b->iodepth * b->nr_queues;
	*slots = calloc(*n, sizeof(**slots));
	if (!*slots)
		return -1;
	for (unsigned int i = 0; i < *n; i++) {
		(*slots)[i].b = b;
		(*slots)[i].queue = i % b->nr_queues;
		if (posix_memalign((void **)&(*slots)[i].buf, 4096, b->bs))
			return -1;
		memset((*slots)[i].buf, 0, b->bs);
	}
	return 0;
}

/* Keep every slot busy for runtime seconds, then wait (30 s at most) for what is in flight. */
static void bench_run(struct bench *b, struct slot *slots, unsigned int n, double runtime,
		      const struct xbd_front_opts *opts, struct result *res)
{
	struct rusage ru0, ru1;
	uint64_t t0;
	int rc;

	getrusage(RUSAGE_SELF, &ru0);
	t0 = xbd_mono_ns();
	b->end_ns = t0 + (uint64_t)(runtime * 1e9);
	for (unsigned int i = 0; i < n && !b->stopping; i++)
		submit_one(&slots[i]);
	while (xbd_front_inflight(b->f) > 0) {
		rc = xbd_front_run(b->f, 1000);
		if (rc < 0) {
			fprintf(stderr, "xbd-front bench: %s: %s\n", cli_devname(opts), strerror(-rc));
			break;
		}
		if (xbd_mono_ns() > b->end_ns + 30ull * 1000000000ull) {
			fprintf(stderr, "xbd-front bench: %u requests still in flight 30 s after the end\n",
				xbd_front_inflight(b->f));
			res->stuck = true;
			break;
		}
	}
	res->secs = (double)(xbd_mono_ns() - t0) / 1e9;
	getrusage(RUSAGE_SELF, &ru1);
	res->cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
		   (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
	qsort(b->lat, b->nr_lat, sizeof(*b->lat), cmp_u64);
	xbd_front_stats(b->f, &res->st);
}

static void report_json(struct bench *b, const struct result *r)
{
	printf("{\"rw\":\"%s\",\"bs\":%" PRIu64 ",\"iodepth\":%u,\"queues\":%u,"
	       "\"runtime_s\":%.3f,\"reads\":%" PRIu64 ",\"writes\":%" PRIu64 ","
	       "\"iops\":%.1f,\"read_bw_mib_s\":%.2f,\"write_bw_mib_s\":%.2f,"
	       "\"lat_us\":{\"p50\":%.1f,\"p99\":%.1f,\"p99.9\":%.1f},"
	       "\"cpu_s\":%.3f,\"errors\":%" PRIu64 ",\"verify\":%s,\"verify_errors\":%" PRIu64 ","
	       "\"reconnects\":%" PRIu64 ",\"resubmitted\":%" PRIu64 ",\"completed_twice\":%" PRIu64 ","
	       "\"fua\":%s,\"ring_requests\":%" PRIu64 ",\"indirect\":%" PRIu64 ",\"notifies\":%" PRIu64 "}\n",
	       rw_names[b->rw], b->bs, b->iodepth, b->nr_queues, r->secs, b->reads, b->writes,
	       (double)(b->reads + b->writes) / r->secs, (double)b->bytes_read / r->secs / 1048576.0,
	       (double)b->bytes_written / r->secs / 1048576.0, pct(b, 50), pct(b, 99),
	       pct(b, 99.9), r->cpu, b->errors, b->verify ? "true" : "false", b->verify_errors,
	       r->st.reconnects, r->st.resubmitted, b->double_completions, b->fua ? "true" : "false",
	       r->st.requests, r->st.indirect, r->st.notifies);
}

static void report_text(struct bench *b, const struct result *r, const struct xbd_front_opts *opts)
{
	double secs = r->secs;

	printf("xbd-front bench: %s rw=%s bs=%" PRIu64 " iodepth=%u queues=%u runtime=%.2fs%s\n",
	       cli_devname(opts), rw_names[b->rw], b->bs, b->iodepth, b->nr_queues, secs,
	       b->fua ? " fua" : "");
	printf("  iops: %.1f (read %" PRIu64 ", write %" PRIu64 ")\n",
	       (double)(b->reads + b->writes) / secs, b->reads, b->writes);
	printf("  bw: read %.2f MiB/s, write %.2f MiB/s\n", (double)b->bytes_read / secs / 1048576.0,
	       (double)b->bytes_written / secs / 1048576.0);
	printf("  lat (us): p50 %.1f  p99 %.1f  p99.9 %.1f\n", pct(b, 50), pct(b, 99),
	       pct(b, 99.9));
	printf("  cpu: %.3f s (%.0f%% of one CPU)\n", r->cpu, secs > 0 ? r->cpu / secs * 100 : 0);
	if (b->verify)
		printf("  verify: %" PRIu64 " mismatches\n", b->verify_errors);
	printf("  ring requests: %" PRIu64 " (%" PRIu64 " indirect), notifies: %" PRIu64
	       ", reconnects: %" PRIu64 ", resubmitted: %" PRIu64 "\n",
	       r->st.requests, r->st.indirect, r->st.notifies, r->st.reconnects, r->st.resubmitted);
	printf("  errors: %" PRIu64 "%s%s\n", b->errors, b->first_error ? " first: " : "",
	       b->first_error ? strerror(-b->first_error) : "");
	if (b->double_completions)
		printf("  completed twice: %" PRIu64 "\n", b->double_completions);
}

int cmd_bench(int argc, char **argv)
{
	struct xbd_front_opts opts;
	struct xbd_front_info in;
	struct result res = { 0 };
	struct bench b;
	struct slot *slots = NULL;
	uint64_t size = 0;
	double runtime = 5.0;
	bool json = false;
	unsigned int i, n = 0;
	int rc, ret = 1;

	memset(&b, 0, sizeof(b));
	b.rw = RW_RANDREAD;
	b.bs = 4096;
	b.iodepth = 16;
	b.rwmix_read = 50;
	b.rng = 0x9e3779b97f4a7c15ull;
	xbd_front_opts_init(&opts);
	rc = bench_args(argc, argv, &b, &opts, &runtime, &size, &json);
	if (rc >= 0)
		return rc;
	rc = xbd_front_open(&opts, &b.f);
	if (rc < 0) {
		cli_open_failed(&opts, rc);
		return 1;
	}
	xbd_front_info(b.f, &in);
	if (!bench_prepare(&b, &in, size, &opts, &slots, &n)) {
		bench_run(&b, slots, n, runtime, &opts, &res);
		if (json)
			report_json(&b, &res);
		else
			report_text(&b, &res, &opts);
		ret = (res.stuck || b.errors || b.verify_errors || b.reads + b.writes == 0) ? 1 : 0;
	}
	xbd_front_close(b.f);
	if (slots)
		for (i = 0; i < n; i++)
			free(slots[i].buf);
	free(slots);
	free(b.written);
	free(b.busy);
	free(b.lat);
	return ret;
}
