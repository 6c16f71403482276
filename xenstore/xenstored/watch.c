/*
 * watch.c: WATCH, UNWATCH and event delivery for xbd-xenstored.
 *
 * Watches are indexed by their (absolute) path, so an event on /a/b/c looks
 * up only /a/b/c, /a/b, /a and / instead of every watch of every client:
 * thousands of watches cost nothing on unrelated writes.
 *
 * Rules, as xenstored: a watch fires once when set, then on any change to
 * its node or below; a watch set with a relative path reports relative
 * paths; the event reaches a client only if it may read the node, or the
 * node's parent, or (after SET_PERMS) could read it before; the special
 * paths @introduceDomain and @releaseDomain follow their own permissions.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xenstore/xenstored/internal.h"

struct xsd_watch_bucket {
	struct xsd_hent ent;
	struct xsd_watch *head;
	char path[];
};

struct xsd_watch {
	struct xsd_watch *bnext, *bprev;	/* same path, any connection */
	struct xsd_watch *cnext, *cprev;	/* same connection */
	struct xsd_watch_bucket *b;
	struct xsd_conn *c;
	bool relative;
	char *token;
};

static struct xsd_watch_bucket *bucket_get(struct xsd *x, const char *path)
{
	struct xsd_hent *e = xsd_hmap_get(&x->watch_index, path);

	return e ? xsd_container_of(e, struct xsd_watch_bucket, ent) : NULL;
}

static void watch_free(struct xsd *x, struct xsd_watch *w)
{
	struct xsd_conn *c = w->c;

	if (w->bprev)
		w->bprev->bnext = w->bnext;
	else
		w->b->head = w->bnext;
	if (w->bnext)
		w->bnext->bprev = w->bprev;
	if (!w->b->head) {
		xsd_hmap_del(&x->watch_index, &w->b->ent);
		free(w->b);
	}
	if (w->cprev)
		w->cprev->cnext = w->cnext;
	else
		c->watches = w->cnext;
	if (w->cnext)
		w->cnext->cprev = w->cprev;
	if (c->dom && c->dom->nwatches)
		c->dom->nwatches--;
	free(w->token);
	free(w);
}

void xsd_watches_drop(struct xsd_conn *c)
{
	while (c->watches)
		watch_free(c->x, c->watches);
}

void xsd_watch_index_fini(struct xsd *x)
{
	struct xsd_conn *c;

	for (c = x->conns; c; c = c->next)
		xsd_watches_drop(c);
	xsd_hmap_fini(&x->watch_index);
}

/* The path a watcher is told about: relative to its home if it registered
 * a relative path. */
static const char *event_path(const struct xsd_watch *w, const char *path)
{
	char home[32];
	size_t l;

	if (!w->relative)
		return path;
	l = (size_t)snprintf(home, sizeof(home), "/local/domain/%u",
			     w->c->domid);
	if (strncmp(path, home, l) != 0)
		return path;
	path += l;
	return *path == '/' ? path + 1 : path;
}

static void send_event(struct xsd_watch *w, const char *path)
{
	const char *p = event_path(w, path);
	size_t pl = strlen(p) + 1, tl = strlen(w->token) + 1;
	char buf[XENSTORE_PAYLOAD_MAX];

	/* Events that would not fit are not sent (as xenstored). */
	if (pl + tl > sizeof(buf))
		return;
	memcpy(buf, p, pl);
	memcpy(buf + pl, w->token, tl);
	xsd_send(w->c, XS_WATCH_EVENT, 0, 0, buf, pl + tl);
}

static bool readable(const struct xsd_conn *c, const struct xsd_perm *p,
		     uint32_t n)
{
	return p && n && (xsd_conn_perm(c, p, n) & XSD_PERM_READ);
}

static bool permitted(struct xsd *x, const struct xsd_conn *c,
		      const char *path, const struct xsd_perm *perms,
		      uint32_t nperms, const struct xsd_perm *oldperms,
		      uint32_t noldperms)
{
	struct xsd_view v = { .st = &x->st };
	const struct xsd_node *n;
	char *parent;
	const char *slash;
	bool ok;

	if (c->privileged)
		return true;
	if (readable(c, perms, nperms) || readable(c, oldperms, noldperms))
		return true;
	if (!perms) {
		n = xsd_view_get(&v, path);
		if (n && readable(c, n->perms, n->nperms))
			return true;
	}
	/* The parent's permissions count too: a reader of a directory hears
	 * about its children, even removed ones. */
	slash = strrchr(path, '/');
	if (!slash)
		return false;
	parent = slash == path ? strdup("/") : strndup(path, slash - path);
	if (!parent)
		return false;
	n = xsd_view_get(&v, parent);
	ok = n && readable(c, n->perms, n->nperms);
	free(parent);
	return ok;
}

static void fire_bucket(struct xsd *x, const char *bucket_path,
			const char *path, const struct xsd_perm *perms,
			uint32_t nperms, const struct xsd_perm *oldperms,
			uint32_t noldperms)
{
	struct xsd_watch_bucket *b = bucket_get(x, bucket_path);
	struct xsd_watch *w;
	bool special = path[0] == '@';

	if (!b)
		return;
	/* Sending never frees watches (killing a connection is deferred),
	 * so the list stays intact while we walk it. */
	for (w = b->head; w; w = w->bnext) {
		if (w->c->dead)
			continue;
		if (special ? !xsd_special_readable(w->c, path)
			    : !permitted(x, w->c, path, perms, nperms,
					 oldperms, noldperms))
			continue;
		send_event(w, path);
	}
}

void xsd_fire_now(struct xsd *x, const char *path, bool exact,
		  const struct xsd_perm *perms, uint32_t nperms,
		  const struct xsd_perm *oldperms, uint32_t noldperms)
{
	char *p;
	char *slash;

	fire_bucket(x, path, path, perms, nperms, oldperms, noldperms);
	if (exact || strcmp(path, "/") == 0)
		return;
	if (path[0] == '@') {
		/* xenstored counts every path, special ones included, as a
		 * child of "/". */
		fire_bucket(x, "/", path, perms, nperms, oldperms, noldperms);
		return;
	}
	p = strdup(path);
	if (!p)
		return;
	while ((slash = strrchr(p, '/'))) {
		if (slash == p) {
			fire_bucket(x, "/", path, perms, nperms, oldperms,
				    noldperms);
			break;
		}
		*slash = '\0';
		fire_bucket(x, p, path, perms, nperms, oldperms, noldperms);
	}
	free(p);
}

void xsd_fire(struct xsd_req *r, const char *path, bool exact,
	      const struct xsd_perm *perms, uint32_t nperms,
	      const struct xsd_perm *oldperms, uint32_t noldperms)
{
	/* Changes inside a transaction are announced when it commits. */
	if (r->txn) {
		if (xsd_txn_queue_event(r->txn, path, exact, perms, nperms,
					oldperms, noldperms) < 0)
			r->txn->ov.failed = true;
		return;
	}
	xsd_fire_now(r->x, path, exact, perms, nperms, oldperms, noldperms);
}

static struct xsd_watch *find_watch(struct xsd_conn *c, const char *path,
				    const char *token)
{
	struct xsd_watch_bucket *b = bucket_get(c->x, path);
	struct xsd_watch *w;

	for (w = b ? b->head : NULL; w; w = w->bnext)
		if (w->c == c && strcmp(w->token, token) == 0)
			return w;
	return NULL;
}

/* WATCH <path>|<token>| */
int xsd_op_watch(struct xsd_req *r)
{
	struct xsd_conn *c = r->c;
	struct xsd_watch_bucket *b;
	struct xsd_watch *w = NULL;
	const char *arg = r->body, *token;
	char *path;
	bool relative;
	size_t l;
	int ret;

	if (xsd_count_strings(r) != 2)
		return EINVAL;
	token = arg + strlen(arg) + 1;
	if (arg[0] == '@') {
		relative = false;
		if (strlen(arg) > XENSTORE_REL_PATH_MAX)
			return EINVAL;
	} else {
		relative = arg[0] != '/';
	}
	path = xsd_canonical(c, arg);
	if (!path)
		return ENOMEM;
	if (arg[0] != '@' && !xsd_valid_path(c, path)) {
		ret = EINVAL;
		goto out;
	}
	if (find_watch(c, path, token)) {
		ret = EEXIST;
		goto out;
	}
	if (!c->privileged &&
	    c->dom->nwatches >= r->x->lim.watches_per_domain) {
		ret = E2BIG;
		goto out;
	}

	ret = ENOMEM;
	w = calloc(1, sizeof(*w));
	if (!w || !(w->token = strdup(token)))
		goto out;
	b = bucket_get(r->x, path);
	if (!b) {
		l = strlen(path) + 1;
		b = calloc(1, sizeof(*b) + l);
		if (!b)
			goto out;
		memcpy(b->path, path, l);
		xsd_hmap_add(&r->x->watch_index, &b->ent, b->path);
	}
	w->b = b;
	w->c = c;
	w->relative = relative;
	w->bnext = b->head;
	if (b->head)
		b->head->bprev = w;
	b->head = w;
	w->cnext = c->watches;
	if (c->watches)
		c->watches->cprev = w;
	c->watches = w;
	c->dom->nwatches++;

	xsd_reply_str(r, "OK");
	/* The first event comes at once, with the path as registered. */
	send_event(w, path);
	w = NULL;
	ret = 0;
out:
	if (w)
		free(w->token);
	free(w);
	free(path);
	return ret;
}

/* UNWATCH <path>|<token>| */
int xsd_op_unwatch(struct xsd_req *r)
{
	struct xsd_watch *w;
	char *path;

	if (xsd_count_strings(r) != 2)
		return EINVAL;
	path = xsd_canonical(r->c, r->body);
	if (!path)
		return ENOMEM;
	w = find_watch(r->c, path, r->body + strlen(r->body) + 1);
	free(path);
	if (!w)
		return ENOENT;
	watch_free(r->x, w);
	xsd_reply_str(r, "OK");
	return 0;
}
