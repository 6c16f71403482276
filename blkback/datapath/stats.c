/*
 * stats.c: recording, snapshotting and printing the per-ring counters
 * (a log line for SIGUSR1, JSON for the control socket).
 */
#include "config.h"

#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <time.h>

#include "common/control-protocol.h"
#include "blkback/datapath/stats.h"
#include "common/clock.h"

/* Short names for the validation reasons, in enum xbd_req_error order. */
static const char *const err_names[XBD_REQ_NR_ERRORS] = {
	[XBD_REQ_OK] = "ok",
	[XBD_REQ_BAD_OP] = "bad_op",
	[XBD_REQ_UNSUPPORTED] = "unsupported",
	[XBD_REQ_READONLY] = "readonly",
	[XBD_REQ_BAD_NR_SEGS] = "bad_nr_segs",
	[XBD_REQ_BAD_INDIRECT_OP] = "bad_indirect_op",
	[XBD_REQ_TOO_MANY_INDIRECT] = "too_many_indirect",
	[XBD_REQ_BAD_SECTORS] = "bad_sectors",
	[XBD_REQ_MISALIGNED] = "misaligned",
	[XBD_REQ_BEYOND_END] = "beyond_end",
	[XBD_REQ_BAD_DISCARD] = "bad_discard",
};

/* Snapshots walk the struct as an array of counters. */
static_assert(sizeof(struct xbd_ring_stats) % sizeof(uint64_t) == 0,
	      "struct xbd_ring_stats must hold uint64_t counters only");
#define NR_COUNTERS (sizeof(struct xbd_ring_stats) / sizeof(uint64_t))

static const char *const bucket_names[XBD_BATCH_BUCKETS] = {
	"1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", "65+",
};

const char *xbd_stats_error_name(unsigned int reason)
{
	return reason < XBD_REQ_NR_ERRORS && err_names[reason] ? err_names[reason] : "other";
}

const char *xbd_stats_bucket_name(unsigned int b)
{
	return b < XBD_BATCH_BUCKETS ? bucket_names[b] : "?";
}

void xbd_stats_batch(struct xbd_ring_stats *s, unsigned int n)
{
	unsigned int b = 0;

	XBD_STAT_INC(s, io_submit_calls);
	XBD_STAT_ADD(s, io_submitted, n);
	while (b < XBD_BATCH_BUCKETS - 1 && n > (1u << b))
		b++;
	XBD_STAT_INC(s, batch_hist[b]);
}

static const char *const lat_op_names[XBD_LAT_OPS] = {
	XBD_OP_READ, XBD_OP_WRITE, XBD_OP_FLUSH, XBD_OP_DISCARD, XBD_OP_BARRIER,
};

const char *xbd_lat_op_name(unsigned int op)
{
	return op < XBD_LAT_OPS ? lat_op_names[op] : "?";
}

uint64_t xbd_lat_bucket_le_ns(unsigned int b)
{
	return b < XBD_LAT_BUCKETS - 1 ? UINT64_C(1) << (XBD_LAT_MIN_SHIFT + b) : UINT64_MAX;
}

/* The bucket of a latency: the smallest b whose bound is >= ns. */
static unsigned int lat_bucket(uint64_t ns)
{
	unsigned int log2_up = ns <= 1 ? 0 : 64 - (unsigned int)__builtin_clzll(ns - 1);

	if (log2_up <= XBD_LAT_MIN_SHIFT)
		return 0;
	log2_up -= XBD_LAT_MIN_SHIFT;
	return log2_up < XBD_LAT_BUCKETS - 1 ? log2_up : XBD_LAT_BUCKETS - 1;
}

void xbd_lat_record(struct xbd_lat_pending *p, struct xbd_ring_stats *s, uint64_t now_ns)
{
	unsigned int i;

	for (i = 0; i < p->n; i++) {
		struct xbd_lat_hist *h;
		uint64_t ns;

		if (p->op[i] >= XBD_LAT_OPS)
			continue;
		h = &s->lat[p->op[i]];
		/* A stamp from the future cannot happen with one monotonic clock; be safe. */
		ns = now_ns > p->consumed_ns[i] ? now_ns - p->consumed_ns[i] : 0;
		xbd_stat_add(&h->bucket[lat_bucket(ns)], 1);
		xbd_stat_add(&h->sum_ns, ns);
		if (ns > __atomic_load_n(&h->max_ns, __ATOMIC_RELAXED))
			__atomic_store_n(&h->max_ns, ns, __ATOMIC_RELAXED);
	}
	p->n = 0;
}

void xbd_lat_record_now(struct xbd_lat_pending *p, struct xbd_ring_stats *s)
{
	xbd_lat_record(p, s, xbd_mono_ns());
}

uint64_t xbd_lat_count(const struct xbd_lat_hist *h)
{
	uint64_t n = 0;
	unsigned int b;

	for (b = 0; b < XBD_LAT_BUCKETS; b++)
		n += h->bucket[b];
	return n;
}

uint64_t xbd_lat_quantile(const struct xbd_lat_hist *h, double q)
{
	uint64_t n = xbd_lat_count(h), cum = 0, rank;
	unsigned int b;

	if (!n)
		return 0;
	/* The rank of the q-quantile among n sorted latencies, 1-based. */
	rank = (uint64_t)(q * (double)n);
	if ((double)rank < q * (double)n)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	for (b = 0; b < XBD_LAT_BUCKETS; b++) {
		uint64_t lo, hi, v;

		if (cum + h->bucket[b] < rank) {
			cum += h->bucket[b];
			continue;
		}
		/* Spread the bucket's requests evenly between its bounds. */
		lo = b ? xbd_lat_bucket_le_ns(b - 1) : 0;
		hi = b < XBD_LAT_BUCKETS - 1 ? xbd_lat_bucket_le_ns(b) : h->max_ns;
		if (hi > h->max_ns && h->max_ns >= lo)
			hi = h->max_ns;
		if (hi < lo)
			hi = lo;
		v = lo + (uint64_t)((double)(hi - lo) * (double)(rank - cum) / (double)h->bucket[b]);
		return v;
	}
	return h->max_ns;
}

void xbd_stats_snapshot(const struct xbd_ring_stats *live, struct xbd_ring_stats *out)
{
	const uint64_t *src = (const uint64_t *)live;
	uint64_t *dst = (uint64_t *)out;
	size_t i;

	for (i = 0; i < NR_COUNTERS; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

void xbd_stats_sum(struct xbd_ring_stats *sum, const struct xbd_ring_stats *s)
{
	const uint64_t *src = (const uint64_t *)s;
	uint64_t *dst = (uint64_t *)sum, max[XBD_LAT_OPS];
	size_t i;

	for (i = 0; i < XBD_LAT_OPS; i++)
		max[i] = sum->lat[i].max_ns > s->lat[i].max_ns ? sum->lat[i].max_ns : s->lat[i].max_ns;
	for (i = 0; i < NR_COUNTERS; i++)
		dst[i] += src[i];
	/* Maxima are not added up. */
	for (i = 0; i < XBD_LAT_OPS; i++)
		sum->lat[i].max_ns = max[i];
}

/* "latency":{"read":{...},...}: counts, quantiles and the buckets (non-cumulative). */
static void lat_json(FILE *f, const struct xbd_ring_stats *s)
{
	unsigned int op, b;

	fprintf(f, ",\"latency\":{");
	for (op = 0; op < XBD_LAT_OPS; op++) {
		const struct xbd_lat_hist *h = &s->lat[op];

		fprintf(f, "%s\"%s\":{\"count\":%" PRIu64 ",\"sum_ns\":%" PRIu64
			",\"max_ns\":%" PRIu64 ",\"p50_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64
			",\"p999_ns\":%" PRIu64 ",\"buckets\":{", op ? "," : "", lat_op_names[op],
			xbd_lat_count(h), h->sum_ns, h->max_ns, xbd_lat_quantile(h, 0.5),
			xbd_lat_quantile(h, 0.99), xbd_lat_quantile(h, 0.999));
		for (b = 0; b < XBD_LAT_BUCKETS - 1; b++)
			fprintf(f, "%s\"%" PRIu64 "\":%" PRIu64, b ? "," : "",
				xbd_lat_bucket_le_ns(b), h->bucket[b]);
		fprintf(f, ",\"+Inf\":%" PRIu64 "}}", h->bucket[XBD_LAT_BUCKETS - 1]);
	}
	fputc('}', f);
}

void xbd_stats_json(FILE *f, const struct xbd_ring_stats *s)
{
	uint64_t invalid = 0;
	unsigned int i;

	for (i = 1; i < XBD_REQ_NR_ERRORS; i++)
		invalid += s->errors[i];
	fprintf(f, "{\"requests\":{\"read\":%" PRIu64 ",\"write\":%" PRIu64 ",\"flush\":%" PRIu64
		",\"discard\":%" PRIu64 ",\"barrier\":%" PRIu64 "}", s->rd_req, s->wr_req, s->f_req,
		s->ds_req, s->barrier_req);
	fprintf(f, ",\"sectors\":{\"read\":%" PRIu64 ",\"written\":%" PRIu64 "}", s->rd_sect,
		s->wr_sect);
	fprintf(f, ",\"errors\":{\"total\":%" PRIu64 ",\"invalid\":%" PRIu64 ",\"grant\":%" PRIu64
		",\"io\":%" PRIu64 ",\"invalid_by_reason\":{", invalid + s->grant_errors + s->io_errors,
		invalid, s->grant_errors, s->io_errors);
	for (i = 1; i < XBD_REQ_NR_ERRORS; i++)
		fprintf(f, "%s\"%s\":%" PRIu64, i > 1 ? "," : "", xbd_stats_error_name(i),
			s->errors[i]);
	fprintf(f, "}},\"out_of_slot_waits\":%" PRIu64, s->oo_req);
	fprintf(f, ",\"io_submit\":{\"calls\":%" PRIu64 ",\"iocbs\":%" PRIu64
		",\"batch_size_histogram\":{", s->io_submit_calls, s->io_submitted);
	for (i = 0; i < XBD_BATCH_BUCKETS; i++)
		fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "", bucket_names[i], s->batch_hist[i]);
	fprintf(f, "}},\"completions\":{\"reaped\":%" PRIu64 ",\"reap_calls\":%" PRIu64 "}",
		s->reaped, s->reap_calls);
	fprintf(f, ",\"grants\":{\"map_calls\":%" PRIu64 ",\"copy_calls\":%" PRIu64
		",\"unmap_calls\":%" PRIu64 ",\"persistent_hits\":%" PRIu64
		",\"persistent_misses\":%" PRIu64 "}", s->grant_map_calls, s->grant_copy_calls,
		s->grant_unmap_calls, s->persistent_hits, s->persistent_misses);
	fprintf(f, ",\"notifications\":{\"sent\":%" PRIu64 ",\"received\":%" PRIu64 "}",
		s->notify_sent, s->notify_recv);
	fprintf(f, ",\"poll\":{\"hits\":%" PRIu64 ",\"misses\":%" PRIu64 ",\"ns\":%" PRIu64 "}",
		s->poll_hits, s->poll_misses, s->poll_ns);
	fprintf(f, ",\"clock_reads\":%" PRIu64, s->clock_reads);
	fprintf(f, ",\"throttled\":{\"requests\":%" PRIu64 ",\"ns\":%" PRIu64 "}", s->throttled,
		s->throttle_ns);
	fprintf(f, ",\"tracking\":{\"held\":%" PRIu64 ",\"syncs\":%" PRIu64
		",\"copied_blocks\":%" PRIu64 "}", s->cbt_held, s->cbt_syncs, s->cbw_blocks);
	lat_json(f, s);
	fputc('}', f);
}

uint64_t xbd_stats_in_flight(const struct xbd_ring_stats *s)
{
	return s->in_flight;
}

/* ---- Prometheus ---- */

/* A counter family member: a field of the stats, scaled (sectors to bytes, ns to s). */
struct prom_counter {
	const char *name;
	const char *help;
	const char *label;      /* an extra label of this member, or NULL */
	size_t off;
	double scale;           /* 0: an integer as it is */
};

/* op="WORD", le="BOUND" */
#define OP_LABEL(word) XBD_LABEL_EQ(XBD_LABEL_OP, word)
#define LE_LABEL(bound) XBD_LABEL_EQ(XBD_LABEL_LE, bound)
#define PC(name, help, label, field, scale) \
	{ name, help, label, offsetof(struct xbd_ring_stats, field), scale }
static const struct prom_counter prom_counters[] = {
	PC(XBD_METRIC_REQUESTS, "Requests accepted from the ring, by operation.",
	   OP_LABEL(XBD_OP_READ), rd_req, 0),
	PC(XBD_METRIC_REQUESTS, NULL, OP_LABEL(XBD_OP_WRITE), wr_req, 0),
	PC(XBD_METRIC_REQUESTS, NULL, OP_LABEL(XBD_OP_FLUSH), f_req, 0),
	PC(XBD_METRIC_REQUESTS, NULL, OP_LABEL(XBD_OP_DISCARD), ds_req, 0),
	PC(XBD_METRIC_REQUESTS, NULL, OP_LABEL(XBD_OP_BARRIER), barrier_req, 0),
	PC(XBD_METRIC_READ_BYTES, "Bytes read for the guest.", NULL, rd_sect, 512),
	PC(XBD_METRIC_WRITTEN_BYTES, "Bytes written for the guest (barrier writes included).", NULL,
	   wr_sect, 512),
	PC(XBD_METRIC_GRANT_ERRORS, "Requests failed because a grant did not map or copy.", NULL,
	   grant_errors, 0),
	PC(XBD_METRIC_IO_ERRORS, "Requests the storage failed.", NULL, io_errors, 0),
	PC(XBD_METRIC_OUT_OF_SLOT, "Times the ring had requests but no free request slot.",
	   NULL, oo_req, 0),
	PC(XBD_METRIC_REAPED, "Storage completions reaped.", NULL, reaped, 0),
	PC(XBD_METRIC_REAP_CALLS, "Calls that reaped storage completions.", NULL, reap_calls, 0),
	PC(XBD_METRIC_GRANT_MAP_CALLS, "Grant map calls (one per batch).", NULL, grant_map_calls, 0),
	PC(XBD_METRIC_GRANT_COPY_CALLS, "Grant copy calls (one per batch).", NULL, grant_copy_calls, 0),
	PC(XBD_METRIC_GRANT_UNMAP_CALLS, "Grant unmap calls.", NULL, grant_unmap_calls, 0),
	PC(XBD_METRIC_PERSISTENT_HITS, "Segments found in the persistent-grant cache.", NULL,
	   persistent_hits, 0),
	PC(XBD_METRIC_PERSISTENT_MISSES, "Segments the persistent-grant cache had to map.", NULL,
	   persistent_misses, 0),
	PC(XBD_METRIC_NOTIFY_SENT, "Event-channel notifications sent to the guest.", NULL,
	   notify_sent, 0),
	PC(XBD_METRIC_NOTIFY_RECEIVED, "Event-channel notifications received from the guest.",
	   NULL, notify_recv, 0),
	PC(XBD_METRIC_POLL_HITS, "Busy-polls that found work.", NULL, poll_hits, 0),
	PC(XBD_METRIC_POLL_MISSES, "Busy-polls that found none.", NULL, poll_misses, 0),
	PC(XBD_METRIC_POLL_SECONDS, "Time spent busy-polling.", NULL, poll_ns, 1e-9),
	PC(XBD_METRIC_CLOCK_READS, "Clock reads of the ring threads (system calls where the clock has no vDSO).", NULL, clock_reads, 0),
	PC(XBD_METRIC_THROTTLED, "Requests that waited for the disk's I/O limits.", NULL,
	   throttled, 0),
	PC(XBD_METRIC_THROTTLED_SECONDS, "Time requests waited for the disk's I/O limits, summed.",
	   NULL, throttle_ns, 1e-9),
	PC(XBD_METRIC_CBT_HELD, "Writes held back while a checkpoint was made.", NULL, cbt_held, 0),
	PC(XBD_METRIC_CBT_SYNCS, "Syncs of the changed-block tracking's file before writes went out.",
	   NULL, cbt_syncs, 0),
	PC(XBD_METRIC_CBW_BLOCKS, "Blocks copied aside for a point-in-time view before a write.",
	   NULL, cbw_blocks, 0),
};
#undef PC

static void prom_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{labels[,extra]} */
static void prom_name(FILE *f, const char *name, const char *labels, const char *extra)
{
	fprintf(f, "%s{%s%s%s}", name, labels, extra && labels[0] ? "," : "", extra ? extra : "");
}

void xbd_stats_prometheus(FILE *f, const struct xbd_stats_series *series, size_t n)
{
	size_t c, i;
	unsigned int r, op, b;

	for (c = 0; c < sizeof(prom_counters) / sizeof(prom_counters[0]); c++) {
		const struct prom_counter *pc = &prom_counters[c];

		if (pc->help)
			prom_head(f, pc->name, "counter", pc->help);
		for (i = 0; i < n; i++) {
			uint64_t v = *(const uint64_t *)((const char *)&series[i].s + pc->off);

			prom_name(f, pc->name, series[i].labels, pc->label);
			if (pc->scale == 0)
				fprintf(f, " %" PRIu64 "\n", v);
			else
				fprintf(f, " %.9g\n", (double)v * pc->scale);
		}
	}
	prom_head(f, XBD_METRIC_INVALID, "counter",
		  "Requests refused by validation, by reason.");
	for (i = 0; i < n; i++) {
		for (r = 1; r < XBD_REQ_NR_ERRORS; r++) {
			char l[48];

			snprintf(l, sizeof(l), XBD_LABEL_EQ(XBD_LABEL_REASON, "%s"), xbd_stats_error_name(r));
			prom_name(f, XBD_METRIC_INVALID, series[i].labels, l);
			fprintf(f, " %" PRIu64 "\n", series[i].s.errors[r]);
		}
	}
	prom_head(f, XBD_METRIC_IN_FLIGHT, "gauge",
		  "Requests taken from the ring and not answered yet.");
	for (i = 0; i < n; i++) {
		prom_name(f, XBD_METRIC_IN_FLIGHT, series[i].labels, NULL);
		fprintf(f, " %" PRIu64 "\n", xbd_stats_in_flight(&series[i].s));
	}
	/* iocbs per io_submit: le 1, 2, 4, ... 64, +Inf; count = calls, sum = iocbs. */
	prom_head(f, XBD_METRIC_SUBMIT_BATCH, "histogram",
		  "iocbs handed to the storage per io_submit call.");
	for (i = 0; i < n; i++) {
		const struct xbd_ring_stats *s = &series[i].s;
		uint64_t cum = 0;

		for (b = 0; b < XBD_BATCH_BUCKETS; b++) {
			char le[24];

			cum += s->batch_hist[b];
			if (b < XBD_BATCH_BUCKETS - 1)
				snprintf(le, sizeof(le), LE_LABEL("%u"), 1u << b);
			else
				snprintf(le, sizeof(le), LE_LABEL(XBD_LABEL_LE_INF));
			prom_name(f, XBD_METRIC_SUBMIT_BATCH XBD_METRIC_BUCKET, series[i].labels, le);
			fprintf(f, " %" PRIu64 "\n", cum);
		}
		prom_name(f, XBD_METRIC_SUBMIT_BATCH XBD_METRIC_SUM, series[i].labels, NULL);
		fprintf(f, " %" PRIu64 "\n", s->io_submitted);
		prom_name(f, XBD_METRIC_SUBMIT_BATCH XBD_METRIC_COUNT, series[i].labels, NULL);
		fprintf(f, " %" PRIu64 "\n", cum);
	}
	prom_head(f, XBD_METRIC_LATENCY, "histogram",
		  "Time from consuming a request from the ring to pushing its response.");
	for (i = 0; i < n; i++) {
		for (op = 0; op < XBD_LAT_OPS; op++) {
			const struct xbd_lat_hist *h = &series[i].s.lat[op];
			uint64_t cum = 0;
			char l[64];

			for (b = 0; b < XBD_LAT_BUCKETS; b++) {
				cum += h->bucket[b];
				if (b < XBD_LAT_BUCKETS - 1)
					snprintf(l, sizeof(l), OP_LABEL("%s") "," LE_LABEL("%.9g"),
						 lat_op_names[op], (double)xbd_lat_bucket_le_ns(b) * 1e-9);
				else
					snprintf(l, sizeof(l), OP_LABEL("%s") "," LE_LABEL(XBD_LABEL_LE_INF),
						 lat_op_names[op]);
				prom_name(f, XBD_METRIC_LATENCY XBD_METRIC_BUCKET, series[i].labels, l);
				fprintf(f, " %" PRIu64 "\n", cum);
			}
			snprintf(l, sizeof(l), OP_LABEL("%s"), lat_op_names[op]);
			prom_name(f, XBD_METRIC_LATENCY XBD_METRIC_SUM, series[i].labels, l);
			fprintf(f, " %.9g\n", (double)h->sum_ns * 1e-9);
			prom_name(f, XBD_METRIC_LATENCY XBD_METRIC_COUNT, series[i].labels, l);
			fprintf(f, " %" PRIu64 "\n", cum);
		}
	}
	prom_head(f, XBD_METRIC_LATENCY_MAX, "gauge",
		  "The longest time from consuming a request to pushing its response.");
	for (i = 0; i < n; i++) {
		for (op = 0; op < XBD_LAT_OPS; op++) {
			char l[32];

			snprintf(l, sizeof(l), OP_LABEL("%s"), lat_op_names[op]);
			prom_name(f, XBD_METRIC_LATENCY_MAX, series[i].labels, l);
			fprintf(f, " %.9g\n", (double)series[i].s.lat[op].max_ns * 1e-9);
		}
	}
}

void xbd_stats_print(FILE *f, const char *prefix, const struct xbd_ring_stats *s)
{
	unsigned int i;
	uint64_t errs = 0;

	for (i = 0; i < XBD_REQ_NR_ERRORS; i++)
		errs += s->errors[i];
	fprintf(f, "xbd-back: %s: rd_req=%" PRIu64 " wr_req=%" PRIu64 " f_req=%" PRIu64
		" ds_req=%" PRIu64 " barrier_req=%" PRIu64 " oo_req=%" PRIu64
		" rd_sect=%" PRIu64 " wr_sect=%" PRIu64 "\n", prefix, s->rd_req, s->wr_req,
		s->f_req, s->ds_req, s->barrier_req, s->oo_req, s->rd_sect, s->wr_sect);
	fprintf(f, "xbd-back: %s: errors=%" PRIu64, prefix, errs);
	for (i = 1; i < XBD_REQ_NR_ERRORS; i++)
		if (s->errors[i])
			fprintf(f, " err_%s=%" PRIu64, err_names[i] ? err_names[i] : "?",
				s->errors[i]);
	fprintf(f, " grant_errors=%" PRIu64 " io_errors=%" PRIu64 "\n", s->grant_errors,
		s->io_errors);
	fprintf(f, "xbd-back: %s: io_submit=%" PRIu64 " submitted=%" PRIu64 " batch_hist=",
		prefix, s->io_submit_calls, s->io_submitted);
	for (i = 0; i < XBD_BATCH_BUCKETS; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", s->batch_hist[i]);
	fprintf(f, " reaped=%" PRIu64 " reap_calls=%" PRIu64 "\n", s->reaped, s->reap_calls);
	fprintf(f, "xbd-back: %s: grant_map=%" PRIu64 " grant_copy=%" PRIu64
		" grant_unmap=%" PRIu64 " persistent_hits=%" PRIu64 " persistent_misses=%" PRIu64
		" notify_sent=%" PRIu64 " notify_recv=%" PRIu64 " poll_hits=%" PRIu64
		" poll_misses=%" PRIu64 " poll_ns=%" PRIu64 " clock_reads=%" PRIu64 "\n", prefix,
		s->grant_map_calls, s->grant_copy_calls, s->grant_unmap_calls, s->persistent_hits,
		s->persistent_misses, s->notify_sent, s->notify_recv, s->poll_hits,
		s->poll_misses, s->poll_ns, s->clock_reads);
}
