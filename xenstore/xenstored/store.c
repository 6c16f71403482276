/*
 * store.c: the node database of xbd-xenstored: committed tree, transaction
 * overlays with per-node generation conflict checks, and permission lists.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xenstore/xenstored/store.h"

/* What a transaction saw of one committed node. */
struct readrec {
	struct xsd_hent ent;
	uint64_t gen;
	char path[];
};

static struct xsd_node *node_of(struct xsd_hent *e)
{
	return e ? xsd_container_of(e, struct xsd_node, ent) : NULL;
}

static void node_free(struct xsd_node *n)
{
	uint32_t i;

	if (!n)
		return;
	for (i = 0; i < n->nkids; i++)
		free(n->kids[i]);
	free(n->kids);
	free(n->perms);
	free(n->data);
	free(n->path);
	free(n);
}

static struct xsd_node *node_new(const char *path)
{
	struct xsd_node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->path = strdup(path);
	if (!n->path) {
		free(n);
		return NULL;
	}
	return n;
}

static struct xsd_node *node_copy(const struct xsd_node *o)
{
	struct xsd_node *n = node_new(o->path);
	uint32_t i;

	if (!n)
		return NULL;
	if (o->datalen) {
		n->data = malloc(o->datalen);
		if (!n->data)
			goto nomem;
		memcpy(n->data, o->data, o->datalen);
		n->datalen = o->datalen;
	}
	n->perms = malloc(o->nperms * sizeof(*n->perms));
	if (!n->perms)
		goto nomem;
	memcpy(n->perms, o->perms, o->nperms * sizeof(*n->perms));
	n->nperms = o->nperms;
	if (o->nkids) {
		n->kids = malloc(o->nkids * sizeof(*n->kids));
		if (!n->kids)
			goto nomem;
		n->capkids = o->nkids;
		for (i = 0; i < o->nkids; i++) {
			n->kids[i] = strdup(o->kids[i]);
			if (!n->kids[i])
				goto nomem;
			n->nkids++;
		}
	}
	n->childlen = o->childlen;
	n->gen = o->gen;
	return n;
nomem:
	node_free(n);
	return NULL;
}

uint32_t xsd_node_size(uint32_t nperms, uint32_t datalen, uint32_t childlen)
{
	/* xenstored's record: 8-byte generation, three 32-bit counts, then
	 * 8 bytes per permission, the value and the child names. */
	return 20 + 8 * nperms + datalen + childlen;
}

int xsd_node_set_data(struct xsd_node *n, const void *data, uint32_t len)
{
	char *d = NULL;

	if (len) {
		d = malloc(len);
		if (!d)
			return -ENOMEM;
		memcpy(d, data, len);
	}
	free(n->data);
	n->data = d;
	n->datalen = len;
	return 0;
}

static int kid_add(struct xsd_node *n, const char *leaf)
{
	char **k;
	char *s;

	if (n->nkids == n->capkids) {
		uint32_t cap = n->capkids ? n->capkids * 2 : 4;

		k = realloc(n->kids, cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		n->kids = k;
		n->capkids = cap;
	}
	s = strdup(leaf);
	if (!s)
		return -ENOMEM;
	n->kids[n->nkids++] = s;
	n->childlen += strlen(leaf) + 1;
	return 0;
}

static void kid_del(struct xsd_node *n, const char *leaf)
{
	uint32_t i;

	for (i = 0; i < n->nkids; i++) {
		if (strcmp(n->kids[i], leaf) == 0) {
			n->childlen -= strlen(leaf) + 1;
			free(n->kids[i]);
			memmove(&n->kids[i], &n->kids[i + 1],
				(n->nkids - i - 1) * sizeof(*n->kids));
			n->nkids--;
			return;
		}
	}
}

/* "/a/b" -> "/a", "/a" -> "/"; the caller frees. */
static char *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash || slash == path)
		return strdup("/");
	return strndup(path, slash - path);
}

static char *child_path(const char *parent, const char *leaf)
{
	char *s;

	if (asprintf(&s, "%s/%s", strcmp(parent, "/") ? parent : "", leaf) < 0)
		return NULL;
	return s;
}

static void owned_add(struct xsd_store *st, const struct xsd_node *n, int d)
{
	if (n && !n->tombstone && n->nperms)
		st->owned[n->perms[0].id] += d;
}

static void overlay_owned_add(struct xsd_overlay *ov, const struct xsd_node *n,
			      int d)
{
	if (n && !n->tombstone && n->nperms && n->perms[0].id == ov->self)
		ov->self_delta += d;
}

static int store_add_root(struct xsd_store *st, const char *path,
			  const char *kid)
{
	struct xsd_node *n = node_new(path);

	if (!n)
		return -ENOMEM;
	/* Xen's initial nodes: owned by dom0, no access for anyone else. */
	n->perms = calloc(1, sizeof(*n->perms));
	if (!n->perms || (kid && kid_add(n, kid) < 0)) {
		node_free(n);
		return -ENOMEM;
	}
	n->nperms = 1;
	n->gen = st->gen++;
	xsd_hmap_add(&st->nodes, &n->ent, n->path);
	owned_add(st, n, 1);
	return 0;
}

int xsd_store_init(struct xsd_store *st)
{
	xsd_hmap_init(&st->nodes);
	st->gen = 1;
	st->owned = calloc(XSD_NR_DOMIDS, sizeof(*st->owned));
	if (!st->owned)
		return -ENOMEM;
	if (store_add_root(st, "/", "tool") < 0 ||
	    store_add_root(st, "/tool", "xenstored") < 0 ||
	    store_add_root(st, "/tool/xenstored", NULL) < 0) {
		xsd_store_fini(st);
		return -ENOMEM;
	}
	return 0;
}

void xsd_store_fini(struct xsd_store *st)
{
	struct xsd_hiter it = { 0 };
	struct xsd_hent *e;

	while ((e = xsd_hmap_next(&st->nodes, &it)))
		node_free(node_of(e));
	xsd_hmap_fini(&st->nodes);
	free(st->owned);
	st->owned = NULL;
}

void xsd_overlay_init(struct xsd_overlay *ov, unsigned int self)
{
	xsd_hmap_init(&ov->nodes);
	xsd_hmap_init(&ov->reads);
	ov->self = self;
	ov->self_delta = 0;
	ov->failed = false;
}

void xsd_overlay_fini(struct xsd_overlay *ov)
{
	struct xsd_hiter it = { 0 };
	struct xsd_hent *e;

	while ((e = xsd_hmap_next(&ov->nodes, &it)))
		node_free(node_of(e));
	memset(&it, 0, sizeof(it));
	while ((e = xsd_hmap_next(&ov->reads, &it)))
		free(xsd_container_of(e, struct readrec, ent));
	xsd_hmap_fini(&ov->nodes);
	xsd_hmap_fini(&ov->reads);
}

static struct xsd_node *global_get(struct xsd_store *st, const char *path)
{
	return node_of(xsd_hmap_get(&st->nodes, path));
}

const struct xsd_node *xsd_view_get(struct xsd_view *v, const char *path)
{
	struct xsd_node *n;
	struct readrec *r;
	size_t len;

	if (!v->ov)
		return global_get(v->st, path);

	n = node_of(xsd_hmap_get(&v->ov->nodes, path));
	if (n)
		return n->tombstone ? NULL : n;

	n = global_get(v->st, path);
	if (!xsd_hmap_get(&v->ov->reads, path)) {
		len = strlen(path);
		r = malloc(sizeof(*r) + len + 1);
		if (!r) {
			v->ov->failed = true;
			return n;
		}
		memcpy(r->path, path, len + 1);
		r->gen = n ? n->gen : XSD_NO_GEN;
		xsd_hmap_add(&v->ov->reads, &r->ent, r->path);
	}
	return n;
}

/* Puts n into the overlay, replacing (and freeing) what was there. */
static void overlay_put(struct xsd_overlay *ov, struct xsd_node *n)
{
	struct xsd_node *old = node_of(xsd_hmap_get(&ov->nodes, n->path));

	if (old) {
		xsd_hmap_del(&ov->nodes, &old->ent);
		node_free(old);
	}
	xsd_hmap_add(&ov->nodes, &n->ent, n->path);
}

struct xsd_node *xsd_view_edit(struct xsd_view *v, const char *path)
{
	const struct xsd_node *cur = xsd_view_get(v, path);
	struct xsd_node *n;

	if (!cur)
		return NULL;
	if (!v->ov || node_of(xsd_hmap_get(&v->ov->nodes, path)) == cur) {
		n = (struct xsd_node *)cur;
	} else {
		n = node_copy(cur);
		if (!n) {
			v->ov->failed = true;
			return NULL;
		}
		overlay_put(v->ov, n);
	}
	n->gen = v->st->gen++;
	return n;
}

int xsd_view_create(struct xsd_view *v, const char *path,
		    const struct xsd_perm *perms, uint32_t nperms)
{
	char *ppath = parent_of(path);
	const char *leaf = strrchr(path, '/') + 1;
	struct xsd_node *n = NULL, *parent;
	int ret = -ENOMEM;

	if (!ppath)
		return -ENOMEM;
	n = node_new(path);
	if (!n)
		goto out;
	n->perms = malloc(nperms * sizeof(*perms));
	if (!n->perms)
		goto out;
	memcpy(n->perms, perms, nperms * sizeof(*perms));
	n->nperms = nperms;
	/* Record that the node was absent, so a concurrent creation
	 * conflicts with this transaction. */
	xsd_view_get(v, path);
	parent = xsd_view_edit(v, ppath);
	if (!parent || kid_add(parent, leaf) < 0)
		goto out;
	n->gen = v->st->gen++;
	if (v->ov) {
		overlay_owned_add(v->ov, n, 1);
		overlay_put(v->ov, n);
	} else {
		owned_add(v->st, n, 1);
		xsd_hmap_add(&v->st->nodes, &n->ent, n->path);
	}
	n = NULL;
	ret = 0;
out:
	if (ret < 0 && v->ov)
		v->ov->failed = true;
	node_free(n);
	free(ppath);
	return ret;
}

static int remove_subtree(struct xsd_view *v, const char *path)
{
	const struct xsd_node *n = xsd_view_get(v, path);
	struct xsd_node *t;
	uint32_t i;
	char *cp;

	if (!n)
		return 0;
	/* Children first.  Inside a transaction n may be the committed node,
	 * which this loop never changes; outside one, only n's children are
	 * freed while we walk n's list. */
	for (i = 0; i < n->nkids; i++) {
		cp = child_path(n->path, n->kids[i]);
		if (!cp || remove_subtree(v, cp) < 0) {
			free(cp);
			return -ENOMEM;
		}
		free(cp);
	}
	if (v->ov) {
		t = node_new(path);
		if (!t)
			return -ENOMEM;
		t->tombstone = true;
		t->gen = XSD_NO_GEN;
		overlay_owned_add(v->ov, n, -1);
		overlay_put(v->ov, t);	/* may free n if it was a copy */
	} else {
		t = (struct xsd_node *)n;
		owned_add(v->st, t, -1);
		xsd_hmap_del(&v->st->nodes, &t->ent);
		node_free(t);
	}
	return 0;
}

int xsd_view_remove(struct xsd_view *v, const char *path)
{
	char *ppath = parent_of(path);
	struct xsd_node *parent;
	int ret = -ENOMEM;

	if (!ppath)
		goto out;
	parent = xsd_view_edit(v, ppath);
	if (!parent)
		goto out;
	kid_del(parent, strrchr(path, '/') + 1);
	ret = remove_subtree(v, path);
out:
	if (ret < 0 && v->ov)
		v->ov->failed = true;
	free(ppath);
	return ret;
}

int xsd_view_set_perms(struct xsd_view *v, const char *path,
		       const struct xsd_perm *perms, uint32_t nperms)
{
	struct xsd_node *n = xsd_view_edit(v, path);
	struct xsd_perm *p;

	if (!n)
		return -ENOMEM;
	p = malloc(nperms * sizeof(*p));
	if (!p) {
		if (v->ov)
			v->ov->failed = true;
		return -ENOMEM;
	}
	memcpy(p, perms, nperms * sizeof(*p));
	if (v->ov)
		overlay_owned_add(v->ov, n, -1);
	else
		owned_add(v->st, n, -1);
	free(n->perms);
	n->perms = p;
	n->nperms = nperms;
	if (v->ov)
		overlay_owned_add(v->ov, n, 1);
	else
		owned_add(v->st, n, 1);
	return 0;
}

static bool owned_by(const struct xsd_node *n, unsigned int domid)
{
	return n && !n->tombstone && n->nperms && n->perms[0].id == domid;
}

int xsd_overlay_owned_delta(struct xsd_store *st, struct xsd_overlay *ov,
			    unsigned int domid)
{
	struct xsd_hiter it = { 0 };
	struct xsd_hent *e;
	struct xsd_node *n;
	int delta = 0;

	while ((e = xsd_hmap_next(&ov->nodes, &it))) {
		n = node_of(e);
		delta += owned_by(n, domid);
		delta -= owned_by(global_get(st, n->path), domid);
	}
	return delta;
}

int xsd_store_commit(struct xsd_store *st, struct xsd_overlay *ov)
{
	struct xsd_hiter it = { 0 };
	struct xsd_hent *e;
	struct readrec *r;
	struct xsd_node *n, *old;

	if (ov->failed)
		return -ENOMEM;
	while ((e = xsd_hmap_next(&ov->reads, &it))) {
		r = xsd_container_of(e, struct readrec, ent);
		old = global_get(st, r->path);
		if ((old ? old->gen : XSD_NO_GEN) != r->gen)
			return -EAGAIN;
	}

	/* Every node in the overlay was looked at first, so no conflict means
	 * the overlay's parents and children lists agree with the tree. */
	memset(&it, 0, sizeof(it));
	while ((e = xsd_hmap_next(&ov->nodes, &it))) {
		n = node_of(e);
		xsd_hmap_del(&ov->nodes, e);
		old = global_get(st, n->path);
		if (old) {
			owned_add(st, old, -1);
			xsd_hmap_del(&st->nodes, &old->ent);
			node_free(old);
		}
		if (n->tombstone) {
			node_free(n);
			continue;
		}
		n->gen = st->gen++;
		owned_add(st, n, 1);
		xsd_hmap_add(&st->nodes, &n->ent, n->path);
	}
	return 0;
}

void xsd_store_forget_domain(struct xsd_store *st, unsigned int domid)
{
	struct xsd_hiter it = { 0 };
	struct xsd_hent *e;
	struct xsd_node *n;
	uint32_t i, j;

	if (domid == 0)
		return;
	while ((e = xsd_hmap_next(&st->nodes, &it))) {
		n = node_of(e);
		if (n->perms[0].id == domid) {
			owned_add(st, n, -1);
			n->perms[0].id = 0;
			owned_add(st, n, 1);
		}
		for (i = j = 1; i < n->nperms; i++)
			if (n->perms[i].id != domid)
				n->perms[j++] = n->perms[i];
		n->nperms = j;
	}
}

int xsd_perm_parse(const char *s, struct xsd_perm *p)
{
	unsigned long id = 0;
	const char *d;

	switch (s[0]) {
	case 'n': p->perms = XSD_PERM_NONE; break;
	case 'r': p->perms = XSD_PERM_READ; break;
	case 'w': p->perms = XSD_PERM_WRITE; break;
	case 'b': p->perms = XSD_PERM_READ | XSD_PERM_WRITE; break;
	default: return -EINVAL;
	}
	if (!s[1])
		return -EINVAL;
	for (d = s + 1; *d; d++) {
		if (*d < '0' || *d > '9')
			return -EINVAL;
		id = id * 10 + (unsigned long)(*d - '0');
		if (id >= XSD_NR_DOMIDS)
			return -EINVAL;
	}
	p->id = (uint16_t)id;
	return 0;
}

int xsd_perm_format(const struct xsd_perm *p, char *buf, unsigned int len)
{
	static const char letter[4] = { 'n', 'r', 'w', 'b' };

	return snprintf(buf, len, "%c%u", letter[p->perms & 3],
			(unsigned int)p->id);
}

unsigned int xsd_perm_for(const struct xsd_perm *perms, uint32_t nperms,
			  unsigned int domid, bool privileged, int target)
{
	const unsigned int all = XSD_PERM_READ | XSD_PERM_WRITE |
				 XSD_PERM_OWNER;
	uint32_t i;

	/* Owners and the toolstack get everything; a domain given a target
	 * (a device model) acts as its target's owner. */
	if (privileged || perms[0].id == domid ||
	    (target >= 0 && perms[0].id == (unsigned int)target))
		return all;
	/* Otherwise the first entry naming the domain applies, and the first
	 * entry of the list is also the default for everyone else. */
	for (i = 1; i < nperms; i++)
		if (perms[i].id == domid ||
		    (target >= 0 && perms[i].id == (unsigned int)target))
			return perms[i].perms;
	return perms[0].perms;
}
