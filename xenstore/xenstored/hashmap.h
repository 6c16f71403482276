/*
 * hashmap.h: an intrusive string-keyed hash table, used by xbd-xenstored for
 * the node store, transaction overlays and the watch index.
 *
 * The entry lives inside the caller's object and the key is not copied, so
 * inserting never allocates and never fails: a transaction commit cannot stop
 * half-way for lack of memory.  Growing the bucket array may fail; the table
 * then simply keeps longer chains.
 */
#ifndef XBD_XENSTORED_HASHMAP_H
#define XBD_XENSTORED_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

struct xsd_hent {
	struct xsd_hent *next;
	uint32_t hash;
	const char *key;	/* must stay valid while the entry is inserted */
};

struct xsd_hmap {
	struct xsd_hent **buckets;
	size_t nbuckets;	/* power of two */
	size_t count;
	struct xsd_hent *one;	/* fallback bucket if no array could be had */
};

/* Cursor for xsd_hmap_next(); start with { 0 }. */
struct xsd_hiter {
	size_t bucket;
	struct xsd_hent *ent, *next;
};

void xsd_hmap_init(struct xsd_hmap *m);
/* Frees the bucket array; the entries belong to the caller. */
void xsd_hmap_fini(struct xsd_hmap *m);
struct xsd_hent *xsd_hmap_get(const struct xsd_hmap *m, const char *key);
/* Inserts e (whose key must not be present yet). */
void xsd_hmap_add(struct xsd_hmap *m, struct xsd_hent *e, const char *key);
void xsd_hmap_del(struct xsd_hmap *m, struct xsd_hent *e);
/* Iterates over all entries; the current entry may be deleted. */
struct xsd_hent *xsd_hmap_next(const struct xsd_hmap *m, struct xsd_hiter *it);

#define xsd_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#endif
