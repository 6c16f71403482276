/*
 * front-internal.h: libxbdfront's private structures, shared by its files:
 * xbdfront.c (open/close, event loop), negotiate.c (xenstore handshake and
 * the state machine that follows the backend), io.c (splitting, ring
 * requests, responses, resubmission) and grants.c (granted bounce pages and
 * the data copied into and out of them).
 */
#ifndef XBD_FRONT_INTERNAL_H
#define XBD_FRONT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include "blkfront/xbdfront.h"
#include "xenstore/xenbus.h"

/* Largest number of queues we ever set up (Linux blkback offers nr_cpus). */
#define XBD_FRONT_MAX_QUEUES 16u
/* Data pages granted at once by default, all queues together (gntalloc allows 1024). */
#define XBD_FRONT_DEFAULT_GRANTS 768u
/* Linux blkfront's default indirect segment count (xen_blkif_max_segments). */
#define XBD_FRONT_DEFAULT_INDIRECT 32u
/* Data pages plus indirect pages of the largest request. */
#define XBD_FRONT_MAX_PAGES (XBD_MAX_SEGS + XBD_MAX_INDIRECT_PAGES)

/* One granted page: our address and the reference the backend maps. */
struct xbdf_page {
	void *addr;
	uint32_t ref;
	struct xbdf_page *next; /* free list */
};

/* A caller's request; its ring requests point back to it. */
struct xbdf_io {
	struct xbd_front *f;
	xbd_front_cb cb;
	void *arg;
	unsigned int parts;   /* ring requests not yet completed */
	int result;           /* first error */
	bool flush_after;     /* FUA in flush-cache mode: flush once the write is done */
	int queue;
	const struct iovec *iov; /* the caller's data (reads land here on completion) */
	int iovcnt;
	struct iovec one;     /* iov for a plain buffer */
};

/*
 * A ring request: the shadow Linux blkfront keeps, enough to send it
 * again after a reconnect.  Its bounce pages hold the write data (or
 * receive the read data) and stay ours until the response.
 */
struct xbdf_shadow {
	struct xbdf_shadow *next; /* wait list of its queue */
	struct xbdf_io *io;
	uint8_t op;              /* BLKIF_OP_READ/WRITE/WRITE_BARRIER/FLUSH_DISKCACHE/DISCARD */
	uint8_t discard_flags;
	bool indirect;           /* sent as BLKIF_OP_INDIRECT */
	uint64_t sector;         /* 512-byte units */
	uint64_t nr_sectors;     /* discard */
	uint32_t len;            /* data bytes */
	uint64_t data_off;       /* where its data starts in the caller's iov */
	int result;              /* 0 or -errno once answered */
	unsigned int nr_segs;
	unsigned int nr_ind;
	bool pooled;             /* pages from the persistent pool, else one region */
	bool nopages;            /* waiting for pages (grant budget); data in wbuf */
	uint8_t *wbuf;           /* write data while nopages */
	void *region;            /* non-persistent: one xbd_gnt_share of all pages */
	unsigned int nr_pages;   /* nr_segs + nr_ind */
	struct xbdf_page pages[XBD_FRONT_MAX_PAGES]; /* region: embedded entries */
	struct xbdf_page *pool[XBD_FRONT_MAX_PAGES];  /* pooled: the pool entries */
};

/* A region the backend still mapped when we ended access: retried later. */
struct xbdf_deferred {
	struct xbdf_deferred *next;
	void *addr;
	unsigned int count;
	bool data;              /* counts against the queue's grant budget */
};

struct xbdf_queue {
	pthread_mutex_t lock;
	struct xbd_front *f;
	unsigned int idx;
	struct xbd_evtchn *evt;  /* one handle (fd) per queue, kept across reconnects */
	int port;                /* -1: none */
	void *sring;             /* NULL: no ring */
	unsigned int nr_ring_pages;
	uint32_t ring_refs[XBD_RING_MAX_PAGES];
	struct xring ring;
	bool live;               /* backend connected: requests may be pushed */
	struct xbdf_shadow **slot;/* in flight, by id (ring_entries) */
	unsigned int nr_slots;
	unsigned int *free_ids;
	unsigned int nr_free;
	struct xbdf_shadow *wait_head, *wait_tail; /* not yet on the ring */
	struct xbdf_page *pool;   /* persistent grants: LIFO free list */
	unsigned int pool_count, pool_total;
	/*
	 * Data pages granted now (pool, per-request regions, and those still
	 * mapped on the other side) and the most this queue may grant: real
	 * Xen's gntalloc allows 1024 grants for the whole of dom0 by default.
	 */
	unsigned int granted, budget;
	struct xbdf_shadow *failed;  /* could not get pages: completed by reap */
	struct xbdf_deferred *deferred;
};

struct xbd_front {
	struct xbd_front_opts opts;
	struct xbd_platform *plat;
	struct xbd_xs *xs;
	struct xbd_xs_watch *watch;
	int epfd;
	bool be_changed;         /* set by the watch, handled by process */
	enum xenbus_state fstate;/* what we last wrote */
	pthread_mutex_t lock;    /* info, broken, stats below */
	struct xbd_front_info info;
	int broken;              /* 0, -EPROTO, -ENODEV, -ESHUTDOWN */
	const char *error;
	unsigned int nr_queues_alloc;
	atomic_uint next_queue;
	atomic_uint inflight;    /* caller requests not yet completed */
	struct xbdf_queue queues[XBD_FRONT_MAX_QUEUES];
	/* completions collected under queue locks, run without them */
	struct xbd_front_stats stats;
	/* offered by the backend (read at talk and connect) */
	unsigned int be_max_order, be_max_queues;
	char owner[64];          /* "<pid> <start time>": see negotiate.c */
};

/* grants.c */
int xbdf_pages_get(struct xbdf_queue *q, struct xbdf_shadow *s, unsigned int n);
void xbdf_pages_put(struct xbdf_queue *q, struct xbdf_shadow *s);
void xbdf_pool_drain(struct xbdf_queue *q);
void xbdf_unshare_or_defer(struct xbdf_queue *q, void *addr, unsigned int count, bool data);
/* Retry deferred unshares; returns how many remain. */
unsigned int xbdf_deferred_retry(struct xbdf_queue *q);
/* Copy n bytes between a page and the caller's vector at byte off of its data (to_iov: page -> vector). */
void xbdf_iov_copy(const struct xbdf_io *io, uint64_t off, void *page, size_t n, bool to_iov);
void xbdf_copy_pages(struct xbdf_shadow *s, bool to_iov);
/* Copy len bytes of write data from src into the shadow's pages. */
void xbdf_shadow_fill(struct xbdf_shadow *s, const uint8_t *src);
/* Copy n bytes of a write shadow's data from byte off (pages or wbuf) to dst. */
void xbdf_shadow_data_out(const struct xbdf_shadow *s, uint32_t off, uint8_t *dst, uint32_t n);

/* io.c */
void xbdf_queue_kick(struct xbdf_queue *q);      /* q->lock held */
int xbdf_queue_reap(struct xbdf_queue *q);       /* consume responses, complete them */
struct xbdf_shadow *xbdf_queue_refit(struct xbdf_queue *q); /* q->lock held */
void xbdf_queue_finish(struct xbdf_queue *q, struct xbdf_shadow *done); /* no lock */
int xbdf_shadow_drop_pages(struct xbdf_queue *q, struct xbdf_shadow *s); /* q->lock held */
void xbdf_queue_requeue_inflight(struct xbdf_queue *q, struct xbdf_shadow **head,
				 struct xbdf_shadow **tail);
void xbd_front_fail_all(struct xbd_front *f, int err);
void xbd_front_set_broken(struct xbd_front *f, int err, const char *why);

/* negotiate.c */
int xbd_front_resolve(struct xbd_front *f);
int xbd_front_attach(struct xbd_front *f);
int xbd_front_follow_backend(struct xbd_front *f);
void xbd_front_teardown_rings(struct xbd_front *f);
/* Closing -> Closed within timeout_ms (at most one full wait), rings down. */
void xbd_front_detach(struct xbd_front *f, int timeout_ms);

#endif /* XBD_FRONT_INTERNAL_H */
