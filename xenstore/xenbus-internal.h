/*
 * xenbus-internal.h: the state behind a struct xbd_xs, shared by the files
 * of libxbdxenbus (I/O, watches, state machine).  Not for users of the
 * library: they see only xenstore/xenbus.h.
 */
#ifndef XBD_XENBUS_INTERNAL_H
#define XBD_XENBUS_INTERNAL_H

#include <errno.h>

#include "xenstore/xenbus.h"

struct xbd_xs_watch {
	struct xbd_xs_watch *next;
	struct xbd_xs_watch *prev;
	char *path;
	/* Unique per handle and never reused, so an event still queued for a
	 * watch that was removed cannot reach a newer watch at the same address. */
	char token[40];
	xbd_xs_watch_cb cb;
	void *arg;
	/* Unwatched while a dispatch was running: freed when it returns. */
	bool dead;
	/* xbd_xs_watch_node: only events for path itself reach cb. */
	bool node_only;
};

struct xbd_xs {
	struct xs_handle *h;
	int fd;
	uint64_t next_token;
	struct xbd_xs_watch *watches;
	/* Nesting depth of xbd_xs_dispatch (callbacks may wait_state, which dispatches). */
	unsigned int dispatching;
	bool have_dead;
	/* Events read and dropped without a callback (xbd_xs_dropped). */
	uint64_t dropped;
};

/* libxenstore reports failures in errno; make sure we never return 0 for one. */
static inline int xbd_xs_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

#endif /* XBD_XENBUS_INTERNAL_H */
