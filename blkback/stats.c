/*
 * stats.c: recording and printing the per-ring counters.
 */
#include "config.h"

#include <inttypes.h>

#include "blkback/stats.h"

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

void xbd_stats_batch(struct xbd_ring_stats *s, unsigned int n)
{
	unsigned int b = 0;

	s->io_submit_calls++;
	s->io_submitted += n;
	while (b < XBD_BATCH_BUCKETS - 1 && n > (1u << b))
		b++;
	s->batch_hist[b]++;
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
		" poll_misses=%" PRIu64 " poll_ns=%" PRIu64 "\n", prefix, s->grant_map_calls,
		s->grant_copy_calls, s->grant_unmap_calls, s->persistent_hits,
		s->persistent_misses, s->notify_sent, s->notify_recv, s->poll_hits,
		s->poll_misses, s->poll_ns);
}
