/*
 * stats.h: per-ring counters.  Every field is a uint64 written only by
 * the ring's own thread, with relaxed atomic stores (a plain store on
 * x86-64: no lock, no fence), so that the control socket can read them
 * with relaxed atomic loads at any time without a lock and without ever
 * slowing the data path; a reader sees each counter whole, possibly a
 * few increments stale.  Names follow Linux blkback (rd_req, wr_req,
 * f_req, ds_req, oo_req, rd_sect, wr_sect) plus the counts the data
 * path's ideas change.
 */
#ifndef XBD_BACK_STATS_H
#define XBD_BACK_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "ring/ring.h"

/* io_submit batch sizes: 1, 2, 3-4, 5-8, 9-16, 17-32, 33-64, 65+. */
#define XBD_BATCH_BUCKETS 8

/*
 * Request latency, from consuming a request to pushing its response,
 * per op, in log2 buckets: bucket b < XBD_LAT_BUCKETS - 1 counts the
 * latencies of at most 2^(XBD_LAT_MIN_SHIFT + b) ns (and more than the
 * bucket below it), 1.024 us up to 68.7 s; the last bucket counts the
 * rest.  The number of answered requests is the sum of the buckets.
 */
#define XBD_LAT_MIN_SHIFT 10
#define XBD_LAT_BUCKETS 28

enum xbd_lat_op { XBD_LAT_READ, XBD_LAT_WRITE, XBD_LAT_FLUSH, XBD_LAT_DISCARD,
		  XBD_LAT_BARRIER, XBD_LAT_OPS };

struct xbd_lat_hist {
	uint64_t bucket[XBD_LAT_BUCKETS];
	uint64_t sum_ns;
	uint64_t max_ns;        /* summed devices and rings keep the largest */
};

struct xbd_ring_stats {
	uint64_t rd_req, wr_req, f_req, ds_req, barrier_req;
	uint64_t oo_req;        /* requests that waited for a free I/O slot */
	uint64_t rd_sect, wr_sect;
	uint64_t errors[XBD_REQ_NR_ERRORS]; /* refused by validation, by reason */
	uint64_t grant_errors;  /* requests failed because a grant did not map/copy */
	uint64_t io_errors;     /* requests the storage failed */
	uint64_t io_submit_calls, io_submitted;
	uint64_t batch_hist[XBD_BATCH_BUCKETS];
	uint64_t reaped, reap_calls;
	uint64_t grant_map_calls, grant_copy_calls, grant_unmap_calls;
	uint64_t persistent_hits, persistent_misses;
	uint64_t notify_sent, notify_recv;
	uint64_t poll_hits, poll_misses, poll_ns;
	uint64_t clock_reads;     /* the ring thread's clock_gettime calls */
	uint64_t throttled;       /* requests that waited for the disk's I/O limits */
	uint64_t throttle_ns;     /* the time they waited, summed */
	uint64_t cbt_held;        /* writes a checkpoint's drained section held back (cbt.c) */
	uint64_t cbt_syncs;       /* the tracking file made durable before writes went out */
	uint64_t cbw_blocks;      /* blocks a view needed, copied aside before a write (cbw.c) */
	struct xbd_lat_hist lat[XBD_LAT_OPS];
	/*
	 * A gauge, not a counter: requests taken from the ring and not yet
	 * answered by a pushed response (req_cons - rsp_prod, what the crash
	 * journal says is in flight), set by the ring thread where it takes
	 * requests, where it pushes and where it starts.  Set, not added up, because a worker killed
	 * between two of its steps leaves the counters above off by what it
	 * was doing (a response pushed and its latency not yet recorded, a
	 * request journaled and not yet counted): the successor that resumes
	 * on its slot sets this one from the ring's indexes, exactly.
	 */
	uint64_t in_flight;
};

/*
 * Responses written since the last push, with the time their requests
 * were consumed: the ring thread notes each response where it writes it
 * and records them all at once, with one clock read, where it pushes.
 * When it fills up between two pushes (rings of more than
 * XBD_LAT_PENDING entries) the oldest are recorded early, at the time
 * the next one is noted.
 */
#define XBD_LAT_PENDING 128
struct xbd_lat_pending {
	unsigned int n;
	uint8_t op[XBD_LAT_PENDING];
	uint64_t consumed_ns[XBD_LAT_PENDING];
};

/* The ring thread's increment: single writer, so load + store, no RMW. */
static inline void xbd_stat_add(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}
#define XBD_STAT_INC(s, field) xbd_stat_add(&(s)->field, 1)
#define XBD_STAT_ADD(s, field, n) xbd_stat_add(&(s)->field, (n))

/* A copy of live counters that another thread is updating. */
void xbd_stats_snapshot(const struct xbd_ring_stats *live, struct xbd_ring_stats *out);
/* sum += s, field by field. */
void xbd_stats_sum(struct xbd_ring_stats *sum, const struct xbd_ring_stats *s);
/* Write s as a JSON object (the shape is in xbdctl(8)). */
void xbd_stats_json(FILE *f, const struct xbd_ring_stats *s);
/* The name of a validation error reason in the counters ("bad_op", ...). */
const char *xbd_stats_error_name(unsigned int reason);
/* The label of batch-size bucket b ("1", "2", "3-4", ..., "65+"). */
const char *xbd_stats_bucket_name(unsigned int b);

void xbd_stats_batch(struct xbd_ring_stats *s, unsigned int n);

/* The histogram a blkif op's latency goes to (XBD_LAT_OPS: none). */
static inline unsigned int xbd_lat_op(uint8_t blkif_op)
{
	switch (blkif_op) {
	case BLKIF_OP_READ:
		return XBD_LAT_READ;
	case BLKIF_OP_WRITE:
		return XBD_LAT_WRITE;
	case BLKIF_OP_FLUSH_DISKCACHE:
		return XBD_LAT_FLUSH;
	case BLKIF_OP_DISCARD:
		return XBD_LAT_DISCARD;
	case BLKIF_OP_WRITE_BARRIER:
		return XBD_LAT_BARRIER;
	default:
		return XBD_LAT_OPS;
	}
}
/* "read", "write", "flush", "discard", "barrier". */
const char *xbd_lat_op_name(unsigned int op);
/* The upper bound of bucket b in ns (UINT64_MAX for the last). */
uint64_t xbd_lat_bucket_le_ns(unsigned int b);
/* Record every noted response as pushed at now_ns (CLOCK_MONOTONIC). */
void xbd_lat_record(struct xbd_lat_pending *p, struct xbd_ring_stats *s, uint64_t now_ns);
/* The same, reading the clock itself. */
void xbd_lat_record_now(struct xbd_lat_pending *p, struct xbd_ring_stats *s);
/* A response is written for a request consumed at consumed_ns. */
static inline void xbd_lat_note(struct xbd_lat_pending *p, struct xbd_ring_stats *s,
				uint8_t blkif_op, uint64_t consumed_ns)
{
	if (p->n == XBD_LAT_PENDING)
		xbd_lat_record_now(p, s);
	p->op[p->n] = (uint8_t)xbd_lat_op(blkif_op);
	p->consumed_ns[p->n++] = consumed_ns;
}
/* Requests answered: the sum of the buckets. */
uint64_t xbd_lat_count(const struct xbd_lat_hist *h);
/* The q-quantile (0 < q <= 1) in ns, interpolated in its bucket; 0 when empty. */
uint64_t xbd_lat_quantile(const struct xbd_lat_hist *h, double q);
/* Requests taken and not answered yet (the in_flight gauge: summed rings add up). */
uint64_t xbd_stats_in_flight(const struct xbd_ring_stats *s);

/* One ring's counters and the Prometheus labels that name it. */
struct xbd_stats_series {
	const char *labels;     /* domain="5",device="vbd/5/51712",ring="0" */
	struct xbd_ring_stats s;
};
/*
 * Every counter of the series in the Prometheus text exposition format,
 * one metric family at a time (HELP, TYPE, then a sample per series).
 */
void xbd_stats_prometheus(FILE *f, const struct xbd_stats_series *series, size_t n);

/* One line per group, each prefixed with prefix ("vbd/1/51728 ring 0"). */
void xbd_stats_print(FILE *f, const char *prefix, const struct xbd_ring_stats *s);

#endif /* XBD_BACK_STATS_H */
