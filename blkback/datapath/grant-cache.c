/*
 * grant-cache.c: a ring's persistent grants (blkif.h feature-persistent)
 * in a bounded LRU, the batch mappings they share, and the mappings that
 * carried I/O waiting out the unmap grace before they are unmapped
 * (struct bk_retired in grant-cache.h).  Used by one ring's thread only.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "blkback/datapath/ring-thread.h"

/* ---- unmapping after a grace period ---- */


static void retired_unmap(struct xbd_bring *br, void *addr, unsigned int count)
{
	xbd_gnt_unmap(xbd_ring_plat(br), addr, count);
	XBD_STAT_INC(br->base.stats, grant_unmap_calls);
	br->pg_retired -= count;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Unmap count persistent-grant pages at addr once the grace has passed.
 * They move from pg_pinned to pg_retired, which BK_RETIRED_MAX bounds.
 */
static void unmap_later(struct xbd_bring *br, void *addr, unsigned int count)
{
	struct bk_retired *r = malloc(sizeof(*r));

	br->pg_pinned -= count;
	br->pg_retired += count;
	if (!r) {
		/* Out of memory: wait out the grace here rather than risk the window. */
		uint64_t since = xbd_mono_ns() - br->last_done_ns;

		if (since < BK_UNMAP_GRACE_NS)
			sleep_ns(BK_UNMAP_GRACE_NS - since);
		retired_unmap(br, addr, count);
		return;
	}
	r->addr = addr;
	r->count = count;
	/* The pages' last I/O completed by the last reap that found any. */
	r->at = br->last_done_ns;
	r->next = NULL;
	if (br->retired_tail)
		br->retired_tail->next = r;
	else
		br->retired_head = r;
	br->retired_tail = r;
}

/* Unmap what has waited long enough (all of it if wait: sleep out the grace). */
void grant_retire_due(struct xbd_bring *br, bool wait)
{
	struct bk_retired *r;

	while ((r = br->retired_head)) {
		uint64_t now = xbd_mono_ns();

		if (now - r->at < BK_UNMAP_GRACE_NS) {
			if (!wait)
				return;
			sleep_ns(BK_UNMAP_GRACE_NS - (now - r->at));
			continue;
		}
		br->retired_head = r->next;
		if (!br->retired_head)
			br->retired_tail = NULL;
		retired_unmap(br, r->addr, r->count);
		free(r);
	}
}


/* ---- persistent grants: a bounded per-ring LRU (blkif.h recommends LRU) ---- */

static void lru_unlink(struct bk_gcache *c, struct bk_pgrant *g)
{
	if (g->lru_prev)
		g->lru_prev->lru_next = g->lru_next;
	else
		c->lru_head = g->lru_next;
	if (g->lru_next)
		g->lru_next->lru_prev = g->lru_prev;
	else
		c->lru_tail = g->lru_prev;
	g->lru_prev = g->lru_next = NULL;
}

static void lru_push_head(struct bk_gcache *c, struct bk_pgrant *g)
{
	g->lru_prev = NULL;
	g->lru_next = c->lru_head;
	if (c->lru_head)
		c->lru_head->lru_prev = g;
	else
		c->lru_tail = g;
	c->lru_head = g;
}

static void hash_remove(struct bk_gcache *c, struct bk_pgrant *g)
{
	struct bk_pgrant **pp = &c->hash[g->gref % BK_PG_BUCKETS];

	while (*pp && *pp != g)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = g->hnext;
}

/* Drop every remaining entry of an unused region from the cache and unmap it. */
static void region_release(struct xbd_bring *br, struct bk_pregion *rg)
{
	struct bk_gcache *c = &br->gcache;
	unsigned int i;

	for (i = 0; i < rg->count; i++) {
		struct bk_pgrant *g = rg->ents[i];

		if (!g)
			continue;
		if (g->cached) {
			lru_unlink(c, g);
			hash_remove(c, g);
			c->count--;
		}
		free(g);
	}
	unmap_later(br, rg->addr, rg->count);
	free(rg);
}

/*
 * A mapping is unmapped whole, so a page of a region that is no longer
 * cached (evicted, used once, or a duplicate) stays mapped until nothing
 * of its region is in use; then the whole region goes, cached siblings
 * included, after the grace (unmap_later).  That way a page we do not
 * cache is not left mapped much longer than its batch's I/O.
 */
void grant_region_check(struct xbd_bring *br, struct bk_pregion *rg)
{
	if (!rg->building && !rg->users && rg->live < rg->count)
		region_release(br, rg);
}

/* An entry nobody uses and the cache does not hold: unmap its page (or region). */
static void pg_unmap_free(struct xbd_bring *br, struct bk_pgrant *g)
{
	struct bk_pregion *rg = g->rg;

	if (!rg) {
		unmap_later(br, g->addr, 1);
		free(g);
		return;
	}
	rg->ents[g->rg_idx] = NULL;
	rg->live--;
	free(g);
	grant_region_check(br, rg);
}

/*
 * Evict the least recently used grant nobody is using (with its region's
 * siblings, none of them in use either); false if all are busy.
 */
static bool gcache_evict_one(struct xbd_bring *br)
{
	struct bk_gcache *c = &br->gcache;
	struct bk_pgrant *g;

	for (g = c->lru_tail; g; g = g->lru_prev)
		if (!g->users && (!g->rg || (!g->rg->users && !g->rg->building)))
			break;
	if (!g)
		return false;
	if (g->rg) {
		region_release(br, g->rg);
		return true;
	}
	lru_unlink(c, g);
	hash_remove(c, g);
	c->count--;
	pg_unmap_free(br, g);
	return true;
}

/* The cached grant for gref, now in use; NULL on a miss. */
struct bk_pgrant *grant_cache_lookup(struct xbd_bring *br, uint32_t gref)
{
	struct bk_gcache *c = &br->gcache;
	struct bk_pgrant *g;

	for (g = c->hash[gref % BK_PG_BUCKETS]; g; g = g->hnext) {
		if (g->gref == gref) {
			XBD_STAT_INC(br->base.stats, persistent_hits);
			g->users++;
			if (g->rg)
				g->rg->users++;
			lru_unlink(c, g);
			lru_push_head(c, g);
			return g;
		}
	}
	return NULL;
}

/*
 * A new entry for a page mapped at addr (inside region rg, or a mapping
 * of its own), cached if there is room.  NULL if out of memory (the page
 * is then unmapped, or left to its region).
 */
struct bk_pgrant *grant_cache_add(struct xbd_bring *br, uint32_t gref, void *addr,
				struct bk_pregion *rg, unsigned int idx)
{
	struct bk_gcache *c = &br->gcache;
	struct bk_pgrant *g = calloc(1, sizeof(*g));

	if (!g) {
		if (!rg) {
			xbd_gnt_unmap(xbd_ring_plat(br), addr, 1);
			br->pg_pinned--;
		}
		return NULL;
	}
	g->gref = gref;
	g->addr = addr;
	g->rg = rg;
	g->users = 1;
	if (rg) {
		g->rg_idx = idx;
		rg->ents[idx] = g;
		rg->live++;
		rg->users++;
	}
	if (c->count >= c->max && !gcache_evict_one(br))
		return g; /* over the bound: used once, then unmapped */
	g->cached = true;
	g->hnext = c->hash[gref % BK_PG_BUCKETS];
	c->hash[gref % BK_PG_BUCKETS] = g;
	lru_push_head(c, g);
	c->count++;
	return g;
}

/* A mapped page for gref, from the cache or freshly mapped read-write on its own. */
struct bk_pgrant *grant_cache_get(struct xbd_bring *br, uint32_t gref, int16_t *status)
{
	struct bk_pgrant *g = grant_cache_lookup(br, gref);
	void *addr;

	if (g)
		return g;
	XBD_STAT_INC(br->base.stats, persistent_misses);
	/* Persistent grants are reused for reads and writes: always read-write. */
	XBD_STAT_INC(br->base.stats, grant_map_calls);
	addr = xbd_gnt_map(xbd_ring_plat(br), br->base.disk->domid, 1, &gref, true, status);
	if (!addr)
		return NULL;
	br->pg_pinned++;
	g = grant_cache_add(br, gref, addr, NULL, 0);
	if (!g)
		*status = GNTST_no_device_space;
	return g;
}

void grant_cache_put(struct xbd_bring *br, struct bk_pgrant *g)
{
	struct bk_pregion *rg = g->rg;

	if (rg)
		rg->users--;
	if (--g->users == 0 && !g->cached)
		pg_unmap_free(br, g); /* checks the region */
	else if (rg)
		grant_region_check(br, rg);
}

void grant_cache_clear(struct xbd_bring *br)
{
	while (br->gcache.lru_head) {
		struct bk_pgrant *g = br->gcache.lru_head;

		lru_unlink(&br->gcache, g);
		hash_remove(&br->gcache, g);
		br->gcache.count--;
		pg_unmap_free(br, g);
	}
}

bool grant_retire_full(const struct xbd_bring *br)
{
	return br->pg_retired > BK_RETIRED_MAX;
}

uint64_t grant_retire_deadline(const struct xbd_bring *br)
{
	return br->retired_head ? br->retired_head->at + BK_UNMAP_GRACE_NS : 0;
}
