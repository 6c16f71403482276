/*
 * xenbus-watch.c: xenstore watches delivered to callbacks from the
 * caller's event loop.  libxenstore queues watch events from its reader
 * thread and makes xs_fileno() readable while any are queued; we drain
 * them with xs_check_watch() and find the callback by token.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xenstore/xenbus-internal.h"

static int watch_add(struct xbd_xs *xs, const char *path, xbd_xs_watch_cb cb, void *arg,
		     bool node_only, struct xbd_xs_watch **out)
{
	struct xbd_xs_watch *w;
	int ret;

	if (!path || !*path || !cb)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->path = strdup(path);
	if (!w->path) {
		free(w);
		return -ENOMEM;
	}
	/* The handle address keeps tokens apart when several handles share a connection's log. */
	snprintf(w->token, sizeof(w->token), "xbd:%" PRIxPTR ":%" PRIu64, (uintptr_t)xs,
		 xs->next_token++);
	w->cb = cb;
	w->arg = arg;
	w->node_only = node_only;

	/* Linked first, so that it is found by token whatever happens next. */
	w->next = xs->watches;
	if (xs->watches)
		xs->watches->prev = w;
	xs->watches = w;

	if (!xs_watch(xs->h, w->path, w->token)) {
		ret = xbd_xs_errno();
		xs->watches = w->next;
		if (w->next)
			w->next->prev = NULL;
		free(w->path);
		free(w);
		return ret;
	}
	if (out)
		*out = w;
	return 0;
}

int xbd_xs_watch(struct xbd_xs *xs, const char *path, xbd_xs_watch_cb cb, void *arg,
		 struct xbd_xs_watch **out)
{
	return watch_add(xs, path, cb, arg, false, out);
}

int xbd_xs_watch_node(struct xbd_xs *xs, const char *path, xbd_xs_watch_cb cb, void *arg,
		      struct xbd_xs_watch **out)
{
	return watch_add(xs, path, cb, arg, true, out);
}

uint64_t xbd_xs_dropped(const struct xbd_xs *xs)
{
	return xs->dropped;
}

static void unlink_free(struct xbd_xs *xs, struct xbd_xs_watch *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		xs->watches = w->next;
	if (w->next)
		w->next->prev = w->prev;
	free(w->path);
	free(w);
}

void xbd_xs_unwatch(struct xbd_xs *xs, struct xbd_xs_watch *w)
{
	if (!w || w->dead)
		return;
	/* Failure means xenstored no longer has it (e.g. connection lost): nothing to undo. */
	xs_unwatch(xs->h, w->path, w->token);
	if (xs->dispatching) {
		/* The dispatch loop may hold w (or be about to look at it). */
		w->dead = true;
		xs->have_dead = true;
		return;
	}
	unlink_free(xs, w);
}

static struct xbd_xs_watch *find_token(struct xbd_xs *xs, const char *token)
{
	struct xbd_xs_watch *w;

	for (w = xs->watches; w; w = w->next)
		if (!w->dead && !strcmp(w->token, token))
			return w;
	return NULL;
}

static void reap_dead(struct xbd_xs *xs)
{
	struct xbd_xs_watch *w, *next;

	for (w = xs->watches; w; w = next) {
		next = w->next;
		if (w->dead)
			unlink_free(xs, w);
	}
	xs->have_dead = false;
}

int xbd_xs_dispatch_some(struct xbd_xs *xs, unsigned int max)
{
	unsigned int seen = 0;
	int count = 0, ret = 0;

	xs->dispatching++;
	while (!max || seen < max) {
		struct xbd_xs_watch *w;
		char **ev = xs_check_watch(xs->h);

		if (!ev) {
			if (errno != EAGAIN)
				/* libxenstore closed the connection after a read error. */
				ret = -ECONNRESET;
			break;
		}
		seen++;
		/* Events for watches removed meanwhile (or not ours) fall through. */
		w = find_token(xs, ev[XS_WATCH_TOKEN]);
		if (w && w->node_only && strcmp(ev[XS_WATCH_PATH], w->path))
			w = NULL;
		if (w) {
			w->cb(xs, ev[XS_WATCH_PATH], w->arg);
			count++;
		} else {
			xs->dropped++;
		}
		free(ev);
	}
	xs->dispatching--;
	if (!xs->dispatching && xs->have_dead)
		reap_dead(xs);
	return ret ? ret : count;
}

int xbd_xs_dispatch(struct xbd_xs *xs)
{
	return xbd_xs_dispatch_some(xs, 0);
}
