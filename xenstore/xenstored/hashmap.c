/*
 * hashmap.c: intrusive string-keyed chained hash table (see hashmap.h).
 *
 * The bucket array doubles when the load factor passes 1, so lookups stay
 * O(1) for the tens of thousands of nodes and watches the daemon may hold.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "xenstore/xenstored/hashmap.h"

/* FNV-1a: short, decent distribution for path-like keys. */
static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 16777619u;
	}
	return h;
}

void xsd_hmap_init(struct xsd_hmap *m)
{
	m->one = NULL;
	m->buckets = &m->one;
	m->nbuckets = 1;
	m->count = 0;
}

void xsd_hmap_fini(struct xsd_hmap *m)
{
	if (m->buckets != &m->one)
		free(m->buckets);
	xsd_hmap_init(m);
}

struct xsd_hent *xsd_hmap_get(const struct xsd_hmap *m, const char *key)
{
	uint32_t h = hash_str(key);
	struct xsd_hent *e;

	for (e = m->buckets[h & (m->nbuckets - 1)]; e; e = e->next)
		if (e->hash == h && strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

static void grow(struct xsd_hmap *m)
{
	size_t n = m->nbuckets < 16 ? 16 : m->nbuckets * 2, i;
	struct xsd_hent **b = calloc(n, sizeof(*b));
	struct xsd_hent *e, *next;

	if (!b)
		return;
	for (i = 0; i < m->nbuckets; i++) {
		for (e = m->buckets[i]; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	if (m->buckets != &m->one)
		free(m->buckets);
	m->buckets = b;
	m->nbuckets = n;
}

void xsd_hmap_add(struct xsd_hmap *m, struct xsd_hent *e, const char *key)
{
	struct xsd_hent **b;

	if (m->count >= m->nbuckets)
		grow(m);
	e->key = key;
	e->hash = hash_str(key);
	b = &m->buckets[e->hash & (m->nbuckets - 1)];
	e->next = *b;
	*b = e;
	m->count++;
}

void xsd_hmap_del(struct xsd_hmap *m, struct xsd_hent *e)
{
	struct xsd_hent **pp;

	for (pp = &m->buckets[e->hash & (m->nbuckets - 1)]; *pp;
	     pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			m->count--;
			return;
		}
	}
}

struct xsd_hent *xsd_hmap_next(const struct xsd_hmap *m, struct xsd_hiter *it)
{
	/* it->next is fetched before handing out an entry, so the caller may
	 * delete (and free) the entry it was given. */
	while (!it->next) {
		if (it->bucket >= m->nbuckets)
			return NULL;
		it->next = m->buckets[it->bucket++];
	}
	it->ent = it->next;
	it->next = it->ent->next;
	return it->ent;
}
