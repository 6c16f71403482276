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
/* One line per group, each prefixed with prefix ("vbd 1/51728 ring 0"). */
void xbd_stats_print(FILE *f, const char *prefix, const struct xbd_ring_stats *s);

#endif /* XBD_BACK_STATS_H */
