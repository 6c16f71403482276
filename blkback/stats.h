/*
 * stats.h: per-ring counters.  Plain uint64 fields written only by the
 * ring's own thread; readers (teardown, SIGUSR1) accept a slightly stale
 * view.  Names follow Linux blkback (rd_req, wr_req, f_req, ds_req,
 * oo_req, rd_sect, wr_sect) plus the counts the data path's ideas change.
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

void xbd_stats_batch(struct xbd_ring_stats *s, unsigned int n);
/* One line per group, each prefixed with prefix ("vbd 1/51728 ring 0"). */
void xbd_stats_print(FILE *f, const char *prefix, const struct xbd_ring_stats *s);

#endif /* XBD_BACK_STATS_H */
