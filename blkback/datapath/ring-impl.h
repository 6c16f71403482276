/*
 * ring-impl.h: what a way of serving rings provides (dataplane.h's
 * struct xbd_ring_server): by a thread of this process (ring-thread.c,
 * xbd_ring_here) or by the disk's worker process, through a proxy in the
 * main process (workers/ring-proxy.c).  Each embeds struct xbd_ring first
 * in a ring of its own, fills it in, and changes its life through
 * xbd_ring_set_life only; dataplane.c dispatches through the table, so
 * that the control plane never asks which it has.  The control plane
 * does not include this header.
 */
#ifndef XBD_BACK_RING_IMPL_H
#define XBD_BACK_RING_IMPL_H

#include <stdbool.h>

#include "blkback/datapath/dataplane.h"
#include "blkback/datapath/ringcpu.h"
#include "blkback/datapath/stats.h"

struct xbd_ring_ops {
	/* A ring of disk, not started (its base filled by xbd_ring_base_init), or NULL. */
	struct xbd_ring *(*create)(struct xbd_ring_server *srv, struct xbd_disk *disk,
				   unsigned int idx);
	/*
	 * Start it as r->p says: 0, -EINPROGRESS (its answer is due:
	 * rep.start_pending) or -errno.
	 */
	int (*start)(struct xbd_ring *r);
	/* Tell it to stop without waiting (xbd_ring_request_stop). */
	void (*request_stop)(struct xbd_ring *r);
	/* Stop it and release everything (xbd_ring_stop). */
	void (*stop)(struct xbd_ring *r);
	/* Free a stopped ring. */
	void (*destroy)(struct xbd_ring *r);
	/* Whether it is served now; if so, its shared header as the control socket shows it. */
	bool (*shared)(const struct xbd_ring *r, struct xring_shared_idx *sh);
};

/* Embedded first in each way's own server. */
struct xbd_ring_server {
	const struct xbd_ring_ops *ops;
};

/*
 * A ring's life.  The thread serving it makes it while it runs; the
 * owner (the control plane, or a worker's main loop) before it starts and
 * once it is joined; for a ring a worker serves, the proxy in the main
 * process makes it from the worker's answers.  What the owner asks
 * (stop), how the ring ended (rep.failed) and SIGTERM's decision
 * (rep.abandoned) are not lives but inputs and outcomes.  The legal
 * edges are xbd_ring_set_life's table (dataplane.c).
 */
enum xbd_ring_life {
	XBD_RING_IDLE = 0,       /* no thread: never started, or joined and released */
	XBD_RING_RUNNING,        /* its thread (or its worker) serves it */
	XBD_RING_DRAINING,       /* the thread saw the stop: nothing more is consumed */
	XBD_RING_RETIRING,       /* its loop ended, nothing in flight: the persistent grants go */
	XBD_RING_EXITED,         /* the thread is done (or its worker said so): the owner joins it */
};

/* What every ring has, however it is served. */
struct xbd_ring {
	const struct xbd_ring_ops *ops;
	struct xbd_disk *disk;
	unsigned int idx;
	char name[48];           /* "vbd/1/51728" or "vbd/1/51728 queue 1" */
	struct xbd_ring_params p; /* what its start was given */
	enum xbd_ring_life life; /* atomic: xbd_ring_life, xbd_ring_set_life */
	volatile bool stop;      /* asked by xbd_ring_request_stop */
	/* What the control plane reads back (xbd_ring_report); rep.failed is stored atomically. */
	struct xbd_ring_report rep;
	int cpu;                 /* the CPU it runs on (pin-rings, ringcpu.h), or -1 */
	char irq_tag[XBD_RINGCPU_TAG_LEN]; /* its event channel interrupt is named "evtchn:" this, or "" */
	/*
	 * Its counters and what its thread last saw: its own, or (p.stats,
	 * p.seen) a slot of the memory a worker shares with the main process,
	 * where xbdctl reads them.
	 */
	struct xbd_ring_stats *stats;
	struct xbd_ring_seen *seen;
	struct xbd_ring_stats own_stats;
	struct xbd_ring_seen own_seen;
};

/* A new ring's base: not started, counting in its own stats (ops->create calls it). */
void xbd_ring_base_init(struct xbd_ring *r, const struct xbd_ring_ops *ops,
			struct xbd_disk *disk, unsigned int idx);

static inline enum xbd_ring_life xbd_ring_life(const struct xbd_ring *r)
{
	return __atomic_load_n(&r->life, __ATOMIC_ACQUIRE);
}

/*
 * The one place a ring's life changes: the edge is checked against one
 * table (dataplane.c), and one that is not there is a bug, said once in a
 * line, and fatal in a build with test hooks.
 */
void xbd_ring_set_life(struct xbd_ring *r, enum xbd_ring_life to);

/* Its frontend corrupted it (any thread): its device closes. */
static inline void xbd_ring_set_failed(struct xbd_ring *r)
{
	__atomic_store_n(&r->rep.failed, true, __ATOMIC_RELAXED);
}

#endif /* XBD_BACK_RING_IMPL_H */
