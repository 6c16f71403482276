/*
 * store.h: the xenstore node database of xbd-xenstored.
 *
 * The committed tree lives in one hash table keyed by absolute path; each
 * node keeps its value, its permission list and the leaf names of its
 * children in creation order (the order DIRECTORY reports, as Xen does).
 *
 * A transaction is an overlay: the nodes it wrote (or deleted, as
 * tombstones) plus the generation of every committed node it looked at.
 * Every write gives the node a fresh generation from one global counter; a
 * commit fails with EAGAIN when any node the transaction looked at has a
 * different generation now (or appeared, or vanished).  This is xenstored's
 * per-node conflict rule.
 */
#ifndef XBD_XENSTORED_STORE_H
#define XBD_XENSTORED_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "xenstore/xenstored/hashmap.h"

/* Permission bits as xenstore_lib.h defines them. */
#define XSD_PERM_NONE	0x00
#define XSD_PERM_READ	0x01
#define XSD_PERM_WRITE	0x02
#define XSD_PERM_OWNER	0x08

#define XSD_NO_GEN	UINT64_MAX
#define XSD_NR_DOMIDS	65536

struct xsd_perm {
	uint16_t id;
	uint8_t perms;	/* XSD_PERM_READ | XSD_PERM_WRITE */
};

struct xsd_node {
	struct xsd_hent ent;
	char *path;
	char *data;
	uint32_t datalen;
	uint32_t nperms;	/* >= 1; perms[0] names the owner */
	struct xsd_perm *perms;
	char **kids;		/* leaf names of the children */
	uint32_t nkids, capkids;
	uint32_t childlen;	/* sum of strlen(kid) + 1 */
	uint64_t gen;
	bool tombstone;		/* deleted inside a transaction overlay */
};

struct xsd_store {
	struct xsd_hmap nodes;
	uint64_t gen;
	uint32_t *owned;	/* committed nodes per owner domid */
};

struct xsd_overlay {
	struct xsd_hmap nodes;	/* path -> xsd_node copy or tombstone */
	struct xsd_hmap reads;	/* path -> generation seen */
	unsigned int self;	/* domid whose node count is tracked */
	int self_delta;		/* change of self's node count so far */
	bool failed;		/* out of memory: the commit must fail */
};

/* Where an operation looks: the committed tree, or a transaction. */
struct xsd_view {
	struct xsd_store *st;
	struct xsd_overlay *ov;	/* NULL outside transactions */
};

int xsd_store_init(struct xsd_store *st);
void xsd_store_fini(struct xsd_store *st);

void xsd_overlay_init(struct xsd_overlay *ov, unsigned int self);
void xsd_overlay_fini(struct xsd_overlay *ov);

/* Looks a node up (NULL if absent); inside a transaction this records the
 * generation seen.  The node must not be modified through this pointer. */
const struct xsd_node *xsd_view_get(struct xsd_view *v, const char *path);
/* Returns a writable node (copied into the overlay inside a transaction)
 * with a fresh generation, or NULL if it is absent or memory ran out. */
struct xsd_node *xsd_view_edit(struct xsd_view *v, const char *path);
/* Creates path, whose parent must exist and which must not, with the given
 * permissions and an empty value.  Returns 0 or -ENOMEM. */
int xsd_view_create(struct xsd_view *v, const char *path,
		    const struct xsd_perm *perms, uint32_t nperms);
/* Deletes path and everything below it; path must exist and not be "/". */
int xsd_view_remove(struct xsd_view *v, const char *path);
/* Replaces the permissions of an existing node. */
int xsd_view_set_perms(struct xsd_view *v, const char *path,
		       const struct xsd_perm *perms, uint32_t nperms);

int xsd_node_set_data(struct xsd_node *n, const void *data, uint32_t len);
/* Bytes xenstored accounts for a node against the entry-size quota. */
uint32_t xsd_node_size(uint32_t nperms, uint32_t datalen, uint32_t childlen);

/* Change the commit of ov would bring to domid's node count. */
int xsd_overlay_owned_delta(struct xsd_store *st, struct xsd_overlay *ov,
			    unsigned int domid);
/* Checks ov for conflicts and applies it: 0, -EAGAIN or -ENOMEM.  On
 * success ov is emptied. */
int xsd_store_commit(struct xsd_store *st, struct xsd_overlay *ov);

/* Forgets domid in every committed permission list: nodes it owned pass to
 * dom0 and its entries are dropped, so that a later domain reusing the id
 * inherits nothing (Xen does the same lazily by generation). */
void xsd_store_forget_domain(struct xsd_store *st, unsigned int domid);

/* Permission strings ("r5", "b0", ...). */
int xsd_perm_parse(const char *s, struct xsd_perm *p);
int xsd_perm_format(const struct xsd_perm *p, char *buf, unsigned int len);
/* What domid may do with a node: XSD_PERM_* bits; privileged gets all. */
unsigned int xsd_perm_for(const struct xsd_perm *perms, uint32_t nperms,
			  unsigned int domid, bool privileged,
			  int target);

#endif
