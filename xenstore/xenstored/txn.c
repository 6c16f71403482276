/*
 * txn.c: TRANSACTION_START / TRANSACTION_END for xbd-xenstored.
 *
 * A transaction is an overlay on the store (store.c does the isolation and
 * the conflict check); this file owns the per-connection list, the ids, the
 * per-connection limit, and the watch events held back until commit.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xenstore/xenstored/internal.h"

struct xsd_txn *xsd_txn_find(struct xsd_conn *c, uint32_t id)
{
	struct xsd_txn *t;

	for (t = c->txns; t; t = t->next)
		if (t->id == id)
			return t;
	return NULL;
}

static void events_free(struct xsd_txn *t)
{
	struct xsd_event *e;

	while ((e = t->events)) {
		t->events = e->next;
		free(e->perms);
		free(e->oldperms);
		free(e);
	}
	t->events_tail = &t->events;
}

static void txn_free(struct xsd_txn *t)
{
	events_free(t);
	xsd_overlay_fini(&t->ov);
	free(t);
}

static void txn_unlink(struct xsd_conn *c, struct xsd_txn *t)
{
	struct xsd_txn **pp;

	for (pp = &c->txns; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			c->ntxns--;
			return;
		}
	}
}

void xsd_txns_drop(struct xsd_conn *c)
{
	struct xsd_txn *t;

	while ((t = c->txns)) {
		c->txns = t->next;
		txn_free(t);
	}
	c->ntxns = 0;
}

static struct xsd_perm *perms_dup(const struct xsd_perm *p, uint32_t n)
{
	struct xsd_perm *d;

	if (!p || !n)
		return NULL;
	d = malloc(n * sizeof(*d));
	if (d)
		memcpy(d, p, n * sizeof(*d));
	return d;
}

int xsd_txn_queue_event(struct xsd_txn *t, const char *path, bool exact,
			const struct xsd_perm *perms, uint32_t nperms,
			const struct xsd_perm *oldperms, uint32_t noldperms)
{
	size_t l = strlen(path) + 1;
	struct xsd_event *e = calloc(1, sizeof(*e) + l);

	if (!e)
		return -ENOMEM;
	memcpy(e->path, path, l);
	e->exact = exact;
	e->perms = perms_dup(perms, nperms);
	e->nperms = e->perms ? nperms : 0;
	e->oldperms = perms_dup(oldperms, noldperms);
	e->noldperms = e->oldperms ? noldperms : 0;
	if ((nperms && !e->perms) || (noldperms && !e->oldperms)) {
		free(e->perms);
		free(e->oldperms);
		free(e);
		return -ENOMEM;
	}
	*t->events_tail = e;
	t->events_tail = &e->next;
	return 0;
}

/* TRANSACTION_START | -> <id>| */
int xsd_op_transaction_start(struct xsd_req *r)
{
	struct xsd_conn *c = r->c;
	struct xsd_txn *t;
	char id[16];

	/* No nesting: a start inside a transaction is refused. */
	if (r->txn)
		return EBUSY;
	if (!c->privileged && c->ntxns >= r->x->lim.transactions_per_conn)
		return ENOSPC;
	t = calloc(1, sizeof(*t));
	if (!t)
		return ENOMEM;
	xsd_overlay_init(&t->ov, c->domid);
	t->events_tail = &t->events;
	/* Ids are per connection, never 0 (which means "no transaction"). */
	do {
		t->id = c->next_txid++;
	} while (t->id == 0 || xsd_txn_find(c, t->id));
	t->next = c->txns;
	c->txns = t;
	c->ntxns++;
	snprintf(id, sizeof(id), "%u", t->id);
	xsd_reply_str(r, id);
	return 0;
}

/* TRANSACTION_END T| commits, F| aborts. */
int xsd_op_transaction_end(struct xsd_req *r)
{
	const char *arg = r->body;
	struct xsd_txn *t = r->txn;
	struct xsd_event *e;
	struct xsd_store *st = &r->x->st;
	bool commit;
	int delta, ret = 0;

	if (!r->len || strlen(arg) + 1 != r->len ||
	    (strcmp(arg, "T") != 0 && strcmp(arg, "F") != 0))
		return EINVAL;
	if (!t)
		return ENOENT;
	commit = arg[0] == 'T';
	txn_unlink(r->c, t);

	if (commit && !r->c->privileged) {
		delta = xsd_overlay_owned_delta(st, &t->ov, r->c->domid);
		if (delta > 0 && (long long)st->owned[r->c->domid] + delta >
				 r->x->lim.entries_per_domain)
			ret = ENOSPC;
	}
	if (commit && !ret) {
		ret = -xsd_store_commit(st, &t->ov);
		if (!ret)
			for (e = t->events; e; e = e->next)
				xsd_fire_now(r->x, e->path, e->exact,
					     e->perms, e->nperms, e->oldperms,
					     e->noldperms);
	}
	txn_free(t);
	/* The reply goes out after the events it caused, as in xenstored
	 * where watch events of a commit are queued before the ack. */
	if (!ret)
		xsd_reply_str(r, "OK");
	return ret;
}
