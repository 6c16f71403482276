/*
 * grants.c: the granted pages a request's data travels in, and its data
 * copied into and out of them.
 *
 * With persistent grants the backend keeps every page it has seen mapped,
 * so pages come from a per-queue LIFO free list: the most recently used
 * page is the one most likely still mapped on the other side (blkif.h's
 * advice).  Without, each request grants its pages in one call and ends
 * access when the response arrives.  A page the backend still maps is
 * never freed: xbd_gnt_unshare() says -EBUSY and the region waits on a
 * deferred list until a later retry succeeds.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkfront/front-internal.h"

static struct xbdf_page *pool_take(struct xbdf_queue *q)
{
	struct xbd_front *f = q->f;
	struct xbdf_page *pg = q->pool;

	if (pg) {
		q->pool = pg->next;
		q->pool_count--;
		return pg;
	}
	pg = calloc(1, sizeof(*pg));
	if (!pg)
		return NULL;
	pg->addr = xbd_gnt_share(f->plat, f->info.backend_domid, 1, true, &pg->ref);
	if (!pg->addr) {
		free(pg);
		return NULL;
	}
	q->pool_total++;
	q->granted++;
	__atomic_add_fetch(&f->stats.grants, 1, __ATOMIC_RELAXED);
	return pg;
}

static void pool_give(struct xbdf_queue *q, struct xbdf_page *pg)
{
	pg->next = q->pool;
	q->pool = pg;
	q->pool_count++;
}

/*
 * q->lock held.  Fills s->pages[0..n) (addr, ref).  -EAGAIN when the
 * queue's grant budget does not allow it now (completions will).
 */
int xbdf_pages_get(struct xbdf_queue *q, struct xbdf_shadow *s, unsigned int n)
{
	struct xbd_front *f = q->f;
	uint32_t refs[XBD_FRONT_MAX_PAGES];
	unsigned int i, fresh;

	s->nr_pages = n;
	s->region = NULL;
	if (n == 0) {
		s->pooled = false;
		return 0;
	}
	fresh = f->info.persistent ? (n > q->pool_count ? n - q->pool_count : 0) : n;
	if (q->budget && q->granted + fresh > q->budget) {
		s->nr_pages = 0;
		return -EAGAIN;
	}
	if (f->info.persistent) {
		s->pooled = true;
		for (i = 0; i < n; i++) {
			s->pool[i] = pool_take(q);
			if (!s->pool[i]) {
				s->nr_pages = i;
				xbdf_pages_put(q, s);
				return -ENOMEM;
			}
			s->pages[i].addr = s->pool[i]->addr;
			s->pages[i].ref = s->pool[i]->ref;
		}
		return 0;
	}
	s->pooled = false;
	s->region = xbd_gnt_share(f->plat, f->info.backend_domid, n, true, refs);
	if (!s->region) {
		s->nr_pages = 0;
		return errno ? -errno : -ENOMEM;
	}
	q->granted += n;
	__atomic_add_fetch(&f->stats.grants, 1, __ATOMIC_RELAXED);
	for (i = 0; i < n; i++) {
		s->pages[i].addr = (uint8_t *)s->region + (size_t)i * XBD_PAGE_SIZE;
		s->pages[i].ref = refs[i];
	}
	return 0;
}

void xbdf_unshare_or_defer(struct xbdf_queue *q, void *addr, unsigned int count, bool data)
{
	struct xbdf_deferred *d;
	int rc = xbd_gnt_unshare(q->f->plat, addr, count);

	if (rc != -EBUSY) {
		if (data)
			q->granted -= count;
		return;
	}
	__atomic_add_fetch(&q->f->stats.deferred_unshare, 1, __ATOMIC_RELAXED);
	d = malloc(sizeof(*d));
	if (!d)
		return; /* leaked on purpose: freeing mapped memory is worse */
	d->addr = addr;
	d->count = count;
	d->data = data;
	d->next = q->deferred;
	q->deferred = d;
}

/* q->lock held.  Gives the shadow's pages back (pool) or ends their grants. */
void xbdf_pages_put(struct xbdf_queue *q, struct xbdf_shadow *s)
{
	unsigned int i;

	if (s->pooled) {
		for (i = 0; i < s->nr_pages; i++) {
			if (q->f->info.persistent) {
				pool_give(q, s->pool[i]);
			} else {
				/* persistent grants were dropped by a reconnect */
				xbdf_unshare_or_defer(q, s->pool[i]->addr, 1, true);
				free(s->pool[i]);
				q->pool_total--;
			}
		}
	} else if (s->region) {
		xbdf_unshare_or_defer(q, s->region, s->nr_pages, true);
	}
	s->region = NULL;
	s->nr_pages = 0;
	s->pooled = false;
}

/* q->lock held: end the grants of every free pool page. */
void xbdf_pool_drain(struct xbdf_queue *q)
{
	struct xbdf_page *pg;

	while ((pg = q->pool)) {
		q->pool = pg->next;
		q->pool_count--;
		q->pool_total--;
		xbdf_unshare_or_defer(q, pg->addr, 1, true);
		free(pg);
	}
}

unsigned int xbdf_deferred_retry(struct xbdf_queue *q)
{
	struct xbdf_deferred **pp = &q->deferred, *d;
	unsigned int left = 0;

	while ((d = *pp)) {
		if (xbd_gnt_unshare(q->f->plat, d->addr, d->count) == -EBUSY) {
			left++;
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		if (d->data)
			q->granted -= d->count;
		free(d);
	}
	return left;
}

/* Pages a shadow holds: pooled (counted in pool_total) or its own region. */
static void count_held(const struct xbdf_shadow *s, unsigned int *pooled, unsigned int *region)
{
	if (s->pooled)
		*pooled += s->nr_pages;
	else if (s->region)
		*region += s->nr_pages;
}

/* q->lock held. */
static int queue_selfcheck(struct xbdf_queue *q, bool idle, char *why, size_t len)
{
	const struct xbdf_shadow *s;
	const struct xbdf_page *pg;
	const struct xbdf_deferred *d;
	unsigned int free_pages = 0, pooled = 0, region = 0, deferred = 0, busy = 0, id;
	bool nopages_seen = false;

	for (pg = q->pool; pg; pg = pg->next)
		free_pages++;
	if (free_pages != q->pool_count) {
		snprintf(why, len, "queue %u: pool list has %u pages, pool_count %u", q->idx,
			 free_pages, q->pool_count);
		return -EUCLEAN;
	}
	for (id = 0; id < q->nr_slots; id++) {
		if ((s = q->slot[id])) {
			busy++;
			count_held(s, &pooled, &region);
		}
	}
	if (busy + q->nr_free != q->nr_slots) {
		snprintf(why, len, "queue %u: %u slots in use + %u free != %u", q->idx, busy,
			 q->nr_free, q->nr_slots);
		return -EUCLEAN;
	}
	for (s = q->wait_head; s; s = s->next) {
		if (s->nopages)
			nopages_seen = true;
		else if (s->nr_pages && nopages_seen) {
			snprintf(why, len, "queue %u: a waiting request holds %u pages behind one"
				 " waiting for pages", q->idx, s->nr_pages);
			return -EUCLEAN;
		}
		count_held(s, &pooled, &region);
		if (!s->next && s != q->wait_tail) {
			snprintf(why, len, "queue %u: wait_tail is not the last entry", q->idx);
			return -EUCLEAN;
		}
	}
	for (s = q->failed; s; s = s->next)
		count_held(s, &pooled, &region);
	for (d = q->deferred; d; d = d->next)
		if (d->data)
			deferred += d->count;
	if (pooled + q->pool_count != q->pool_total) {
		snprintf(why, len, "queue %u: pool_total %u but %u held + %u free", q->idx,
			 q->pool_total, pooled, q->pool_count);
		return -EUCLEAN;
	}
	if (q->granted != q->pool_total + region + deferred) {
		snprintf(why, len, "queue %u: granted %u but pool %u + regions %u + deferred %u",
			 q->idx, q->granted, q->pool_total, region, deferred);
		return -EUCLEAN;
	}
	if (q->budget && q->granted > q->budget) {
		snprintf(why, len, "queue %u: granted %u over the budget %u", q->idx, q->granted,
			 q->budget);
		return -EUCLEAN;
	}
	if (idle && q->pool_count != q->pool_total) {
		snprintf(why, len, "queue %u: idle, yet pool_count %u != pool_total %u", q->idx,
			 q->pool_count, q->pool_total);
		return -EUCLEAN;
	}
	if (q->live && q->wait_head && busy == 0 && !q->deferred) {
		snprintf(why, len, "queue %u: requests wait (%s) with nothing in flight: stranded",
			 q->idx, q->wait_head->nopages ? "for pages" : "for the ring");
		return -EUCLEAN;
	}
	return 0;
}

int xbd_front_selfcheck(struct xbd_front *f, char *why, size_t len)
{
	bool idle = atomic_load(&f->inflight) == 0;
	unsigned int i;
	int rc = 0;

	if (len)
		why[0] = 0;
	for (i = 0; i < f->nr_queues_alloc && rc == 0; i++) {
		struct xbdf_queue *q = &f->queues[i];

		pthread_mutex_lock(&q->lock);
		rc = queue_selfcheck(q, idle, why, len);
		pthread_mutex_unlock(&q->lock);
	}
	return rc;
}

/* ---- a shadow's data in its pages ---- */

/*
 * Copy n bytes between a page and the caller's vector at byte off of its
 * data (to_iov: page -> vector).
 */
void xbdf_iov_copy(const struct xbdf_io *io, uint64_t off, void *page, size_t n, bool to_iov)
{
	uint8_t *p = page;
	int i;

	for (i = 0; i < io->iovcnt && n; i++) {
		size_t l = io->iov[i].iov_len, m;

		if (off >= l) {
			off -= l;
			continue;
		}
		m = l - off < n ? l - off : n;
		if (to_iov)
			memcpy((uint8_t *)io->iov[i].iov_base + off, p, m);
		else
			memcpy(p, (const uint8_t *)io->iov[i].iov_base + off, m);
		p += m;
		n -= m;
		off = 0;
	}
}

/* A shadow's pages and its part of the caller's vector (to_iov: pages -> vector). */
void xbdf_copy_pages(struct xbdf_shadow *s, bool to_iov)
{
	uint32_t left = s->len;
	unsigned int i;

	for (i = 0; i < s->nr_segs; i++) {
		uint32_t n = left < XBD_PAGE_SIZE ? left : XBD_PAGE_SIZE;

		xbdf_iov_copy(s->io, s->data_off + (uint64_t)i * XBD_PAGE_SIZE, s->pages[i].addr, n, to_iov);
		left -= n;
	}
}

/* Copy len bytes of write data from src into the shadow's pages. */
void xbdf_shadow_fill(struct xbdf_shadow *s, const uint8_t *src)
{
	uint32_t left = s->len;
	unsigned int i;

	for (i = 0; i < s->nr_segs; i++) {
		uint32_t n = left < XBD_PAGE_SIZE ? left : XBD_PAGE_SIZE;

		memcpy(s->pages[i].addr, src + (size_t)i * XBD_PAGE_SIZE, n);
		left -= n;
	}
}

/* Copy n bytes of a write shadow's data from byte off (pages or wbuf) to dst. */
void xbdf_shadow_data_out(const struct xbdf_shadow *s, uint32_t off, uint8_t *dst, uint32_t n)
{
	if (s->nopages) {
		memcpy(dst, s->wbuf + off, n);
		return;
	}
	while (n) {
		uint32_t in = off % XBD_PAGE_SIZE, m = XBD_PAGE_SIZE - in < n ? XBD_PAGE_SIZE - in : n;

		memcpy(dst, (const uint8_t *)s->pages[off / XBD_PAGE_SIZE].addr + in, m);
		dst += m;
		off += m;
		n -= m;
	}
}
