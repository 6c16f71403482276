/*
 * grant-cache.h: a ring's persistent grants and the mappings that wait out
 * the unmap grace (grant-cache.c).  Everything here belongs to one ring's
 * thread.
 */
#ifndef XBD_BACK_GRANT_CACHE_H
#define XBD_BACK_GRANT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

struct xbd_bring;
struct bk_req;

/* Linux blkback's xen_blkif_max_pgrants default: persistent grants per ring. */
#define XBD_MAX_PGRANTS 1056

struct bk_req;

/* One xbd_gnt_map call shared by the requests of a batch. */
struct bk_region {
	void *addr;
	unsigned int count;
	unsigned int refs;       /* requests still using it */
	struct bk_req *finished; /* BK_DONE (ring-thread.h): answered once the region is unmapped */
};

/*
 * One xbd_gnt_map call for a batch's persistent-grant misses: a mapping
 * can only be unmapped whole, so it goes once its last grant is evicted.
 */
struct bk_pregion {
	void *addr;
	unsigned int count;
	unsigned int live;       /* entries still pointing into it */
	unsigned int users;      /* requests using its pages (sum of the entries' users) */
	bool building;           /* map_persistent is still creating its entries */
	struct bk_pgrant *ents[]; /* count: the entry of each page, or NULL */
};

/*
 * A mapping of persistent grants that carried I/O, waiting to be unmapped.
 * A Linux dom0 (5.19 and later) unmaps gntdev pages asynchronously when
 * the kernel still holds a reference to them, and the direct I/O that
 * completed a moment ago may still hold one: the completion reaches
 * userspace before the block layer releases the pages.  Unmapping then
 * leaves a live PTE behind ("BUG: Bad page map ... gntdev", a WARNING in
 * __unmap_grant_pages_done).  So such mappings are unmapped only after
 * BK_UNMAP_GRACE_NS (grant-cache.c), and at most BK_RETIRED_MAX pages wait.
 */
struct bk_retired {
	void *addr;
	unsigned int count;
	uint64_t at;             /* CLOCK_MONOTONIC ns when it was retired */
	struct bk_retired *next;
};

/* A persistently mapped grant (blkif.h: feature-persistent). */
struct bk_pgrant {
	uint32_t gref;
	void *addr;
	struct bk_pregion *rg;   /* NULL: a mapping of its own */
	unsigned int rg_idx;     /* its page in rg */
	unsigned int users;
	bool cached;             /* in the LRU; otherwise unmapped when unused */
	struct bk_pgrant *hnext;
	struct bk_pgrant *lru_prev, *lru_next;
};

#define BK_PG_BUCKETS 2048
struct bk_gcache {
	struct bk_pgrant *hash[BK_PG_BUCKETS];
	struct bk_pgrant *lru_head, *lru_tail; /* head = most recently used */
	unsigned int count, max;
};

/*
 * How long a persistent-grant mapping that carried I/O waits before it is
 * unmapped (struct bk_retired): the block layer releases a direct I/O's
 * pages within microseconds of its completion, or from a workqueue soon
 * after; 50 ms is a wide margin.
 */
#define BK_UNMAP_GRACE_NS 50000000ull
/*
 * Pages a ring may hold waiting out the grace.  A frontend whose working
 * set is larger than the cache evicts as fast as it maps; past this bound
 * the ring takes no new requests until the oldest are unmapped, so the
 * mappings a guest can make dom0 hold stay bounded (about 160,000 pages a
 * second per ring can still pass through).
 */
#define BK_RETIRED_MAX 8192

/* The cached grant for gref, now in use (grant_cache_put ends the use); NULL on a miss. */
struct bk_pgrant *grant_cache_lookup(struct xbd_bring *br, uint32_t gref);
/*
 * A new entry for a page mapped at addr (page idx of the batch mapping rg,
 * or a mapping of its own when rg is NULL), in use and cached if there is
 * room.  NULL if out of memory (the page is then unmapped, or left to rg).
 */
struct bk_pgrant *grant_cache_add(struct xbd_bring *br, uint32_t gref, void *addr,
				  struct bk_pregion *rg, unsigned int idx);
/* A mapped page for gref, from the cache or freshly mapped read-write on its own. */
struct bk_pgrant *grant_cache_get(struct xbd_bring *br, uint32_t gref, int16_t *status);
void grant_cache_put(struct xbd_bring *br, struct bk_pgrant *g);
/* A batch mapping that nobody uses any more and that holds uncached pages goes. */
void grant_region_check(struct xbd_bring *br, struct bk_pregion *rg);
/* Drop every cached grant (their mappings wait out the grace). */
void grant_cache_clear(struct xbd_bring *br);
/* Unmap what has waited long enough (all of it if wait: sleep out the grace). */
void grant_retire_due(struct xbd_bring *br, bool wait);
/* Too many pages wait out the grace: take no new requests until they are unmapped. */
bool grant_retire_full(const struct xbd_bring *br);
/* When the oldest waiting mapping may be unmapped (CLOCK_MONOTONIC ns), or 0. */
uint64_t grant_retire_deadline(const struct xbd_bring *br);

#endif /* XBD_BACK_GRANT_CACHE_H */
